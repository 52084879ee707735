// A KeyValue still alive at the program's MPI_Finalize, as objects in main's scope are: its
// cycles and its close made MPI calls after MPI_Finalize, and MPI aborted the job (on the mpi
// and hier backends). MPI_Finalize now closes it first. Its own main: the shared MPI test main
// keeps MPI up around every test. Exit 0 and "kv_finalize: ok" on every rank.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "synk/synk.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  // the engine's own thread
  synk::Communicator comm(MPI_COMM_WORLD);
  synk::KeyValue kv(comm);
  kv.init_key(1, 1000, synk::DataType::float32);
  std::vector<float> a(1000, 1.0f);
  kv.push(1, std::span<const float>(a));
  kv.pull(1, std::span<float>(a));
  kv.pull_wait(1);
  const int rank = comm.rank();
  const bool right = a[0] == static_cast<float>(comm.size()) && a[999] == a[0];
  MPI_Finalize();  // kv, comm: still alive
  std::printf("kv_finalize: %s on rank %d\n", right ? "ok" : "FAILED (wrong sum)", rank);
  return right ? 0 : 1;
}
