// wait_all and wait_any (synk/request.h).
#include "synk/request.h"

#include <algorithm>
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
  if (std::none_of(requests.begin(), requests.end(), [](const Request& r) { return r.active(); })) {
    return requests.size();
  }
  // Polled: a Request has no handle to wait on together with others. Spin, then yield, then
  // sleep 50 us between rounds, so that a long wait leaves the cores to the calls it waits for.
  for (int spins = 0;; detail::backoff(spins)) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (!requests[i].active()) continue;
      bool done = false;
      try {
        done = requests[i].test();
      } catch (...) {
        requests[i] = Request();  // a failed call is retired too: the caller's loop goes on
        throw;
      }
      if (done) {
        requests[i] = Request();
        return i;
      }
    }
  }
}

}  // namespace synk
