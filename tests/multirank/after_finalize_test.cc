// MPI_Finalize with synk's objects alive. Its own main: the shared MPI test main keeps MPI up
// around every test.
// - A non-blocking call still queued when MPI_Finalize starts finishes first: before, the mpi and
//   hier backends' progress thread called MPI after it (a segmentation fault).
// - A call on a live Communicator afterwards, and a Communicator made afterwards: synk::Error
//   (InvalidUsage), not MPI's abort of the whole process (MPI_Initialized stays true after
//   MPI_Finalize, and the MPI_Comm_dup or MPI_Allreduce that came next aborted).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "synk/synk.h"

namespace {

int expect_invalid_usage(const char* what, const std::function<void()>& make,
                         const char* words) {
  try {
    make();
    std::printf("after_finalize: FAILED: %s returned\n", what);
    return 1;
  } catch (const synk::Error& e) {
    const std::string msg = e.what();
    if (e.code() != synk::ErrorCode::InvalidUsage || msg.find(words) == std::string::npos) {
      std::printf("after_finalize: FAILED: %s: %s\n", what, msg.c_str());
      return 1;
    }
    std::printf("after_finalize: ok: %s: %s\n", what, msg.c_str());
    return 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int failures = 0;
  {
    synk::Communicator alive;  // outlives MPI
    std::vector<float> x(1 << 20, 1.0f);
    // Rank 1 issues late, so that the call is still on synk's thread at MPI_Finalize.
    if (alive.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    synk::Request pending = alive.iall_reduce(x.data(), x.data(), x.size(),
                                              synk::DataType::float32, synk::ReduceOp::sum);
    MPI_Finalize();
    pending.wait();
    const float want = static_cast<float>(alive.size());
    if (x.front() != want || x.back() != want) {
      std::printf("after_finalize: FAILED: the pending all_reduce gave %g, not %g\n",
                  static_cast<double>(x.front()), static_cast<double>(want));
      ++failures;
    } else {
      std::printf("after_finalize: ok: the pending all_reduce finished before MPI_Finalize\n");
    }
    const char* finalized = "MPI_Finalize has been called";
    failures += expect_invalid_usage("all_reduce", [&] { alive.all_reduce(x); }, finalized);
    failures += expect_invalid_usage("iall_reduce", [&] { alive.iall_reduce(x).wait(); },
                                     finalized);
    failures += expect_invalid_usage("split", [&] { (void)alive.split(0, 0); }, finalized);
    failures += expect_invalid_usage("alloc", [&] { (void)alive.alloc(64); }, finalized);
  }
  failures += expect_invalid_usage("Communicator()", [] { synk::Communicator c; }, "finalized");
  failures += expect_invalid_usage("Communicator(MPI_COMM_WORLD)",
                                   [] { synk::Communicator c(MPI_COMM_WORLD); }, "finalized");
  return failures == 0 ? 0 : 1;
}
