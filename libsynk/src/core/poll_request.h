// Waiting on a nonblocking MPI collective without trusting it to end: MPI cannot tell a dead or
// stopped peer from a slow one, so the waits that must end in an error (the request packet of
// Distributed, the comparison of calls) poll the request and look for themselves.
#pragma once

#include <mpi.h>

#include <chrono>
#include <thread>

#include "core/mpi_check.h"

namespace synk::detail {

// Tests `req` until it completes: spins for `spin`, then yields until `yield_for` has passed
// since the start, then sleeps 50 us between tests. From the end of the spin, every 10 ms,
// `check()` runs and may throw to give up. Whatever throws (check, or a failed MPI_Test),
// `abandon()` runs first: the request is still pending (an MPI collective cannot be
// cancelled), so MPI may yet use its buffers, which must then never be freed.
template <class Check, class Abandon>
void poll_request(MPI_Request& req, const char* what, std::chrono::microseconds spin,
                  std::chrono::microseconds yield_for, Check&& check, Abandon&& abandon) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto spin_until = start + spin, yield_until = start + yield_for;
  auto next_check = start + std::chrono::milliseconds(10);
  for (;;) {
    int done = 0;
    const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      abandon();
      throw_mpi_error(rc, what);
    }
    if (done) return;
    const auto now = Clock::now();
    if (now < spin_until) continue;
    if (now >= next_check) {
      next_check = now + std::chrono::milliseconds(10);
      try {
        check();
      } catch (...) {
        abandon();
        throw;
      }
    }
    if (now < yield_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace synk::detail
