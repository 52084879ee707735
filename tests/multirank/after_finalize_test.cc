// A Communicator made after MPI_Finalize: synk::Error(InvalidUsage), not MPI's abort of the
// whole process (MPI_Initialized stays true after MPI_Finalize, and the MPI_Comm_dup that came
// next aborted). Its own main: the shared MPI test main keeps MPI up around every test.
#include <mpi.h>

#include <cstdio>
#include <string>

#include "synk/synk.h"

namespace {

int expect_invalid_usage(const char* what, void (*make)()) {
  try {
    make();
    std::printf("after_finalize: FAILED: %s returned\n", what);
    return 1;
  } catch (const synk::Error& e) {
    const std::string msg = e.what();
    if (e.code() != synk::ErrorCode::InvalidUsage || msg.find("finalized") == std::string::npos) {
      std::printf("after_finalize: FAILED: %s: %s\n", what, msg.c_str());
      return 1;
    }
    std::printf("after_finalize: ok: %s: %s\n", what, msg.c_str());
    return 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    synk::Communicator before;  // works while MPI is up
    std::vector<float> x(4, 1.0f);
    before.all_reduce(x);
  }
  MPI_Finalize();
  int failures = 0;
  failures += expect_invalid_usage("Communicator()", [] { synk::Communicator c; });
  failures += expect_invalid_usage("Communicator(MPI_COMM_WORLD)",
                                   [] { synk::Communicator c(MPI_COMM_WORLD); });
  return failures == 0 ? 0 : 1;
}
