// Ranks whose last call is a broadcast with different roots (each its own): every rank runs
// ahead as a root, so the shm backend finds the mismatch only as the communicator closes, in a
// destructor, where it cannot be thrown. The process must not then exit 0, as if its results
// were right (check_close_error.sh: the job fails, and each rank says why).
#include <mpi.h>

#include "synk/synk.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    synk::Communicator comm(MPI_COMM_WORLD, synk::CommOptions{"shm"});
    float x[3] = {1, 2, 3};
    comm.broadcast(x, 3, synk::DataType::float32, comm.rank());
  }
  MPI_Finalize();
  return 0;
}
