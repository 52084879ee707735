// A rank that leaves early: after one call on every rank, the last rank destroys its
// Communicator (mode "destroy") or calls MPI_Finalize (mode "finalize") and makes no more calls,
// while the others call all_reduce once more. On the shm backend they must fail at once (within
// 5 s, SYNK_TIMEOUT being 30) with InvalidUsage saying the rank closed the communicator; they
// waited SYNK_TIMEOUT and were told it had "not reached this call". Exit 0 when every rank saw
// what it should. Usage: left_early_test destroy|finalize
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "synk/synk.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "destroy" && mode != "finalize") {
    std::fprintf(stderr, "usage: left_early_test destroy|finalize\n");
    return 2;
  }
  auto comm = std::make_unique<synk::Communicator>(MPI_COMM_WORLD, synk::CommOptions{"shm"});
  const int rank = comm->rank();
  const bool leaves = rank == comm->size() - 1;
  float x = 1.0f;
  comm->all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  if (leaves) {
    if (mode == "destroy") comm.reset();
    MPI_Finalize();  // in "destroy", after the others' errors (Open MPI's finalize waits)
    return 0;
  }
  int rc = 1;
  const auto start = std::chrono::steady_clock::now();
  try {
    comm->all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
    std::fprintf(stderr, "rank %d: the call returned\n", rank);
  } catch (const synk::Error& e) {
    const auto waited = std::chrono::steady_clock::now() - start;
    const double s = std::chrono::duration<double>(waited).count();
    const std::string what = e.what();
    std::fprintf(stderr, "rank %d after %.1f s: %s\n", rank, s, what.c_str());
    const bool said = e.code() == synk::ErrorCode::InvalidUsage &&
                      what.find("closed this communicator") != std::string::npos;
    rc = said && s < 5.0 ? 0 : 1;
  }
  MPI_Finalize();
  return rc;
}
