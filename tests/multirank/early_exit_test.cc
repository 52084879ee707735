// A rank that leaves with an error while the others wait in a collective (check_early_exit.sh):
// synk starts MPI here, so its exit handler decides about MPI_Finalize. After one all_reduce on
// every rank, rank 0 returns 3; the others call a second all_reduce, which rank 0 never joins.
// Where they learn of it (shm watches its pid), they wait 3 s before they exit in their turn,
// so that rank 0 is the first to fail whatever mpirun sees first.
#include <chrono>
#include <cstdio>
#include <thread>

#include "synk/synk.h"

int main() {
  synk::Communicator comm;
  float x = 1.0f;
  comm.all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  if (comm.rank() == 0) {
    std::fprintf(stderr, "early_exit: rank 0 leaves with exit code 3\n");
    return 3;
  }
  try {
    comm.all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  } catch (const synk::Error& e) {
    std::fprintf(stderr, "early_exit: rank %d: %s\n", comm.rank(), e.what());
    std::this_thread::sleep_for(std::chrono::seconds(3));
    return 1;
  }
  std::fprintf(stderr, "early_exit: rank %d: the second all_reduce returned\n", comm.rank());
  return 0;
}
