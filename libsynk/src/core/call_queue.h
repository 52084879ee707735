// The non-blocking calls of one communicator (Communicator::iall_reduce, ...). They run in the
// order they were issued, each to its end, one at a time: on a progress thread of the
// communicator's own, started at its first non-blocking call and asleep whenever nothing is
// queued (an idle program uses no CPU), or on a thread that waits for one of them and finds
// calls queued that nobody has started (it runs them itself instead of waiting for the progress
// thread to wake). A thread per communicator, not per process: collectives block inside the
// backends until their peers arrive, so one thread for all communicators would let ranks that
// issued calls on two communicators in different orders wait for each other for ever.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <utility>

#include "synk/request.h"

namespace synk::detail {

struct QueueCore;

// One call for a CallQueue: run() does its work to its end on the calling thread, and may
// throw synk::Error. The fields after it are the queue's.
class QueuedCall {
 public:
  explicit QueuedCall(const char* name) : what(name) {}
  virtual ~QueuedCall() = default;
  QueuedCall(const QueuedCall&) = delete;
  QueuedCall& operator=(const QueuedCall&) = delete;
  virtual void run() = 0;

  const char* const what;  // a string literal naming the call, for messages
  std::uint64_t seq = 0;   // its place in the order of issue, from 1
  std::atomic<int> state{0};
  std::exception_ptr error;  // written before state says done
  // Its outcome reached the program (wait or test); atomic, since several threads may wait on
  // or test one Request.
  std::atomic<bool> seen{false};
};

// What a Request of a queued call does (call_queue.cc). ~CallQueue waits for every call, the
// one another thread's wait() is running included; the Requests share the queue's core, which
// a thread still inside wait() may touch after that.
bool test_call(QueuedCall& call);
void wait_call(QueueCore& queue, QueuedCall& call);
void wait_dropped_call(QueueCore& queue, QueuedCall& call) noexcept;

// The program's handle of a queued call, holding the call itself (one allocation per call).
// Dropped before the call has run, it waits for it: the buffers are synk's until then.
template <class Call>
class QueuedRequest final : public Request::Pending {
 public:
  template <class... Args>
  explicit QueuedRequest(std::shared_ptr<QueueCore> queue, Args&&... args)
      : queue_(std::move(queue)), call_(std::forward<Args>(args)...) {}
  ~QueuedRequest() override { wait_dropped_call(*queue_, call_); }
  QueuedRequest(const QueuedRequest&) = delete;
  QueuedRequest& operator=(const QueuedRequest&) = delete;
  bool test() override { return test_call(call_); }
  void wait() override { wait_call(*queue_, call_); }
  QueuedCall& call() { return call_; }

 private:
  std::shared_ptr<QueueCore> queue_;
  Call call_;
};

class CallQueue {
 public:
  CallQueue();
  // Waits for every call issued (their errors are only logged), then stops the thread.
  ~CallQueue();
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  // Queues a Call (a QueuedCall made of args) behind the calls issued before it. The Request
  // completes once it has run; wait() and test() rethrow its error.
  template <class Call, class... Args>
  Request submit(Args&&... args) {
    auto handle = std::make_shared<QueuedRequest<Call>>(core_, std::forward<Args>(args)...);
    enqueue(handle->call());
    return Request(std::move(handle));
  }
  // A blocking call: runs `work` on this thread after the calls issued before it, which it
  // runs here too if nobody has started them (calls stay in the order they were issued). On
  // this thread, so that a call making MPI calls (alloc) keeps MPI's thread level.
  void run_in_order(const std::function<void()>& work);

 private:
  void enqueue(QueuedCall& call);
  std::shared_ptr<QueueCore> core_;
};

// A Request that has completed with `error` (a call that ran before its Request was made):
// wait() and test() rethrow it, as for a call that failed on the progress thread.
Request failed_request(std::exception_ptr error);
// A Request of a call that ran before its Request was made, and succeeded: active (wait_any
// returns it), unlike a default one.
Request completed_request();

}  // namespace synk::detail
