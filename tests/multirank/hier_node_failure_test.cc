// One node of a hier job cannot set up its shared memory (check_hier_node_failure.sh makes its
// /dev/shm a 1 MiB tmpfs and asks for named segments there): every rank of every node must get
// a synk::Error from the Communicator's constructor, promptly. The other node's ranks waited in
// an MPI_Allgather for ever. Each rank prints one line; the script judges them.
#include <mpi.h>

#include <chrono>
#include <string>

#include "../shm/verdict_line.h"
#include "synk/synk.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto start = std::chrono::steady_clock::now();
  std::string line;
  try {
    synk::Communicator comm(MPI_COMM_WORLD);
    line = "made a " + comm.backend() + " communicator";
  } catch (const synk::Error& e) {
    line = "error " + std::string(synk::to_string(e.code())) + ": " + e.what();
  }
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  synk_test::say("rank " + std::to_string(rank) + " after " + std::to_string(s) + " s: " + line +
                 "\n");
  MPI_Finalize();
  return 0;
}
