// A program that owns MPI, adopts MPI_COMM_WORLD with a malformed SYNK_* variable, catches the
// InvalidArgument and goes on: it must live on. The watchdog's thread, started as the refused
// Communicator armed its watch, read the same variable without a catch and aborted the process
// (terminate, exit 134) a moment later.
// Usage: bad_setting_caught_test VAR VALUE
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "synk/synk.h"

namespace {

// 0 when adopting MPI_COMM_WORLD is refused with an InvalidArgument naming `var`.
int expect_refused(const std::string& var) {
  try {
    synk::Communicator refused(MPI_COMM_WORLD);
    std::printf("bad_setting_caught: FAILED: %s was accepted\n", var.c_str());
    return 1;
  } catch (const synk::Error& e) {
    const std::string msg = e.what();
    if (e.code() != synk::ErrorCode::InvalidArgument || msg.find(var) == std::string::npos) {
      std::printf("bad_setting_caught: FAILED: %s\n", msg.c_str());
      return 1;
    }
    std::printf("bad_setting_caught: ok: refused: %s\n", msg.c_str());
    return 0;
  }
}

// 0 when a Communicator made once the variable is put right sums correctly.
int expect_working() {
  synk::Communicator comm(MPI_COMM_WORLD);
  int x = 1;
  comm.all_reduce(&x, &x, 1, synk::DataType::int32, synk::ReduceOp::sum);
  if (x != comm.size()) {
    std::printf("bad_setting_caught: FAILED: the sum was %d, not %d\n", x, comm.size());
    return 1;
  }
  std::printf("bad_setting_caught: ok: synk works once the variable is put right\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bad_setting_caught_test VAR VALUE\n");
    return 2;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  setenv(argv[1], argv[2], 1);
  int failures = expect_refused(argv[1]);
  // Longer than the watchdog's longest period (1 s), with the variable still malformed.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  unsetenv(argv[1]);
  failures += expect_working();
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
