// An existing MPI program that hands part of its world to synk: it splits MPI_COMM_WORLD in
// two halves, gives one half's communicator to synk, and checks synk's all_reduce against its
// own MPI_Allreduce on the same communicator. Run: build/bin/synkrun -np 4 build/bin/mpi_existing
// (or mpirun -np 4 where the machine has 4 cores; synkrun oversubscribes fewer).
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "example_cli.h"
#include "synk/synk.h"

// What --help says.
constexpr const char* kAbout =
    "An existing MPI program that splits MPI_COMM_WORLD in two halves, gives one half's "
    "communicator to synk and checks synk's all_reduce against MPI_Allreduce. Run: synkrun "
    "-np 4 build/bin/mpi_existing";

int main(int argc, char** argv) {
  const int code = synk_example::parse_no_options(argc, argv, "mpi_existing", kAbout);
  if (code >= 0) return code;  // --help or a bad argument
  MPI_Init(&argc, &argv);  // the program owns MPI; synk must neither init nor finalize it
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);

  MPI_Comm half;
  const int color = world_rank < (world_size + 1) / 2 ? 0 : 1;
  MPI_Comm_split(MPI_COMM_WORLD, color, world_rank, &half);

  int failures = 0;
  if (color == 0) {
    synk::Communicator comm(half);  // adopt the caller's communicator
    std::vector<float> mine(1000), by_synk(1000), by_mpi(1000);
    for (std::size_t i = 0; i < mine.size(); ++i) {
      mine[i] = static_cast<float>(world_rank + 1) * 0.5f + static_cast<float>(i % 17);
    }
    comm.all_reduce(mine.data(), by_synk.data(), mine.size(), synk::DataType::float32,
                    synk::ReduceOp::sum);
    MPI_Allreduce(mine.data(), by_mpi.data(), static_cast<int>(mine.size()), MPI_FLOAT, MPI_SUM,
                  half);
    for (std::size_t i = 0; i < mine.size(); ++i) {
      if (by_synk[i] != by_mpi[i]) {
        if (failures++ == 0) {
          std::fprintf(stderr, "rank %d: element %zu: synk %g, MPI %g\n", world_rank, i,
                       static_cast<double>(by_synk[i]), static_cast<double>(by_mpi[i]));
        }
      }
    }
    std::printf("world rank %d: synk rank %d of %d (half %d): all_reduce %s MPI_Allreduce\n",
                world_rank, comm.rank(), comm.size(), color,
                failures ? "DIFFERS FROM" : "matches");
  } else {
    std::printf("world rank %d: in half %d, not using synk\n", world_rank, color);
  }

  int any_failure = 0;
  MPI_Allreduce(&failures, &any_failure, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Comm_free(&half);
  MPI_Finalize();
  return any_failure ? 1 : 0;
}
