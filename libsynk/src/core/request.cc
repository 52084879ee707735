// wait_all and wait_any (synk/request.h).
#include "synk/request.h"

#include <exception>

#include "core/backoff.h"

namespace synk {

void wait_all(std::span<Request> requests) {
  std::exception_ptr first;
  for (Request& r : requests) {
    try {
      r.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

std::size_t wait_any(std::span<Request> requests) {
  if (requests.empty()) return 0;
  // Polled: a Request has no handle to wait on together with others. Spin, then yield, then
  // sleep 50 us between rounds, so that a long wait leaves the cores to the calls it waits for.
  for (int spins = 0;; detail::backoff(spins)) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (requests[i].test()) return i;
    }
  }
}

}  // namespace synk
