// A rank that never joins a collective on a backend that waits inside MPI (check_mpi_stall.sh):
//   stall BACKEND:  the last rank sleeps while the others all_reduce;
//   reject BACKEND: the last rank's all_reduce has no recv buffer, which it alone rejects (no
//                   SYNK_CHECK_CALLS), and it goes on to sleep; the others wait in MPI_Allreduce.
// The waiting ranks must end the job within SYNK_TIMEOUT and a grace, naming their call.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "synk/synk.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: mpi_stall_test stall|reject BACKEND\n");
    return 2;
  }
  const std::string mode = argv[1];
  synk::Communicator comm(MPI_COMM_WORLD, synk::CommOptions{argv[2]});
  const bool odd = comm.rank() == comm.size() - 1;
  float x = 1.0f;
  if (mode == "stall") {
    if (odd) {
      sleep(120);
    } else {
      comm.all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
    }
  } else {
    try {
      comm.all_reduce(&x, odd ? nullptr : &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
    } catch (const synk::Error& e) {
      std::fprintf(stderr, "rank %d: %s\n", comm.rank(), e.what());
      sleep(120);
    }
  }
  std::fprintf(stderr, "rank %d: the call returned\n", comm.rank());
  MPI_Finalize();
  return 0;
}
