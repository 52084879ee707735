// synk::Request: completion of a collective. Host backends complete before returning;
// device backends (NCCL) return while work is queued on a stream.
#pragma once

#include <memory>

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

  bool test() { return !pending_ || pending_->test(); }
  void wait() {
    if (pending_) pending_->wait();
  }

 private:
  std::shared_ptr<Pending> pending_;
};

}  // namespace synk
