// See exit_status.h.
#include "core/exit_status.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace synk::detail {

namespace {

// Handlers run in the reverse order of their registration, so this one, registered late, runs
// before synk's MPI_Finalize at exit: the process leaves without it, and mpirun, seeing a rank
// fail, ends the job (the other ranks may be waiting for this one in MPI_Finalize).
void exit_failed(int status, void*) {
  if (status != 0) return;
  std::fflush(nullptr);  // _Exit skips the flush exit would have made
  std::_Exit(1);
}

}  // namespace

void fail_exit_status() noexcept {
  static std::once_flag registered;
  std::call_once(registered, [] {
#ifdef __GLIBC__
    on_exit(exit_failed, nullptr);
#else
    std::atexit([] { exit_failed(0, nullptr); });
#endif
  });
}

}  // namespace synk::detail
