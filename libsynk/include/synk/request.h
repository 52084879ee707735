// synk::Request: completion of a collective. The blocking calls complete before returning;
// the non-blocking ones (Communicator::iall_reduce, ...) return a Request at once: on the host
// backends the call runs on a progress thread, on the nccl backend it is queued on a stream.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace synk {

class Request {
 public:
  // What a backend implements for work that completes later.
  class Pending {
   public:
    virtual ~Pending() = default;
    virtual bool test() = 0;  // true once complete; throws synk::Error on failure
    virtual void wait() = 0;  // blocks with a deadline (SYNK_TIMEOUT)
  };

  Request() = default;  // an already complete request
  explicit Request(std::shared_ptr<Pending> pending) : pending_(std::move(pending)) {}

  // Whether the call has completed; never blocks. Rethrows the call's error once it has.
  bool test() { return !pending_ || pending_->test(); }
  // Until the call has completed (each call ends within SYNK_TIMEOUT of its peers' arrival);
  // rethrows its error.
  void wait() {
    if (pending_) pending_->wait();
  }
  // Whether it stands for a call (issued, maybe complete); a default Request, or one that
  // wait_any retired, does not.
  bool active() const noexcept { return pending_ != nullptr; }

 private:
  std::shared_ptr<Pending> pending_;
};

// Waits for every request; then rethrows the first error among them, if any.
void wait_all(std::span<Request> requests);
// As MPI_Waitany: waits until one of the active requests has completed, retires it (it becomes
// a default Request, which later calls skip) and returns its index, or rethrows its error;
// requests.size() when none is active.
std::size_t wait_any(std::span<Request> requests);

}  // namespace synk
