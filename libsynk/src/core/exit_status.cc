// See exit_status.h.
#include "core/exit_status.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace synk::detail {

namespace {

std::atomic<pid_t> failed_in{0};  // the process that found the error (not a child forked since)

// Registered as libsynk loads, so it runs after the exit handlers registered since (they run
// in the reverse order of registration): the program's own, the timeline's flush, synk's
// MPI_Finalize. Only the status is changed; what they did stands.
void exit_failed(int status, void*) {
  if (status != 0 || failed_in.load() != getpid()) return;
  std::fflush(nullptr);  // _Exit skips the flush exit would have made
  std::_Exit(1);
}

#ifdef __GLIBC__
[[maybe_unused]] const bool registered = on_exit(exit_failed, nullptr) == 0;
#else
[[maybe_unused]] const bool registered = std::atexit([] { exit_failed(0, nullptr); }) == 0;
#endif

}  // namespace

void fail_exit_status() noexcept { failed_in.store(getpid()); }

}  // namespace synk::detail
