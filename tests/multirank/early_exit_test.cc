// A rank that leaves with an error while the others wait in a collective (check_early_exit.sh):
// synk starts MPI here, so its exit handler decides about MPI_Finalize. After one all_reduce on
// every rank, rank 0 returns 3; the others call a second all_reduce, which rank 0 never joins.
#include <cstdio>

#include "synk/synk.h"

int main() {
  synk::Communicator comm;
  float x = 1.0f;
  comm.all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  if (comm.rank() == 0) {
    std::fprintf(stderr, "early_exit: rank 0 leaves with exit code 3\n");
    return 3;
  }
  comm.all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  std::fprintf(stderr, "early_exit: rank %d: the second all_reduce returned\n", comm.rank());
  return 0;
}
