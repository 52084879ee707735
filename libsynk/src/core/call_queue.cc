// See call_queue.h.
#include "core/call_queue.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/logging.h"
#include "synk/error.h"

namespace synk::detail {

namespace {

enum CallState : int { kQueued = 0, kRunning = 1, kDone = 2 };

// How the progress thread waits for calls. While the program issues calls it looks every
// kPollPeriod, so that issuing never has to wake it (a wake-up is a system call, and on a rank
// bound to one core the woken thread takes the core from the caller; docs/measurements.md,
// "Non-blocking calls beside blocking ones"). While the calls issued are run by their callers
// before it looks (each one waited for at once), it looks half as often each time, down to
// every kLongestPollPeriod: each look takes the core from the caller, in the middle of its
// calls. kStayAwake after the last new call it sleeps until the next.
constexpr auto kPollPeriod = std::chrono::milliseconds(1);
constexpr auto kLongestPollPeriod = std::chrono::milliseconds(16);
constexpr auto kStayAwake = std::chrono::seconds(1);

}  // namespace

struct QueueCore {
  std::mutex exec;  // held by whichever thread runs a call, from taking it to its end
  std::mutex m;     // guards calls, issued, asleep and stop
  std::condition_variable wake;     // the progress thread sleeps on it
  std::deque<QueuedCall*> calls;    // issued, not started, oldest first
  std::atomic<std::size_t> queued{0};  // calls.size(), read without m
  std::uint64_t issued = 0;
  bool asleep = false;  // the progress thread waits for a wake-up, not for its next look
  bool stop = false;
  // Threads waiting for a call that another thread runs sleep on `completions`, which a call's
  // end bumps only when someone sleeps: the call itself may be freed once it says done.
  std::atomic<int> sleepers{0};
  std::atomic<std::uint32_t> completions{0};
  std::thread worker;
};

namespace {

void execute(QueueCore& q, QueuedCall& c) {
  c.state.store(kRunning, std::memory_order_relaxed);
  try {
    c.run();
  } catch (...) {
    c.error = std::current_exception();
  }
  c.state.store(kDone, std::memory_order_seq_cst);  // c is not touched after this
  if (q.sleepers.load(std::memory_order_seq_cst) > 0) {
    q.completions.fetch_add(1, std::memory_order_seq_cst);
    q.completions.notify_all();
  }
}

// The oldest call not yet started, taken from the queue, if it was issued no later than
// `up_to`; the caller holds exec and runs it.
QueuedCall* take_oldest(QueueCore& q, std::uint64_t up_to) {
  std::lock_guard lk(q.m);
  if (q.calls.empty() || q.calls.front()->seq > up_to) return nullptr;
  QueuedCall* c = q.calls.front();
  q.calls.pop_front();
  q.queued.fetch_sub(1, std::memory_order_release);
  return c;
}

// Runs the oldest call not yet started, if there is one issued no later than `up_to`. Holding
// exec from taking the call to its end keeps the order: no later call starts before it ends.
// With `if_idle`, gives up at once when another thread is running a call: the progress thread
// then looks again later, rather than sleeping on exec and being woken (a system call, and a
// core taken from the caller) only to race it for the call it issues next.
bool run_oldest(QueueCore& q, std::uint64_t up_to, bool if_idle = false) {
  std::unique_lock running(q.exec, std::defer_lock);
  if (if_idle) {
    if (!running.try_lock()) return false;
  } else {
    running.lock();
  }
  QueuedCall* c = take_oldest(q, up_to);
  if (c == nullptr) return false;
  execute(q, *c);
  return true;
}

// The progress thread: runs the calls nobody has started, looking every kPollPeriod while
// calls come (less often while their callers run them first), and sleeping once they have
// stopped.
void progress(QueueCore* q) {
  using Clock = std::chrono::steady_clock;
  const auto ready = [&] { return q->stop || !q->calls.empty(); };
  std::uint64_t seen = 0;
  auto period = std::chrono::duration_cast<Clock::duration>(kPollPeriod);
  auto last_new_call = Clock::now();
  for (;;) {
    {
      std::unique_lock lk(q->m);
      while (!ready()) {
        const auto now = Clock::now();
        if (q->issued != seen) {  // calls came since the last look, and their callers ran them
          seen = q->issued;
          last_new_call = now;
          period = std::min<Clock::duration>(period * 2, kLongestPollPeriod);
        }
        if (now - last_new_call < kStayAwake) {
          q->wake.wait_for(lk, period);
        } else {
          q->asleep = true;
          q->wake.wait(lk, ready);
          q->asleep = false;
        }
      }
      if (q->calls.empty()) return;  // stopped, and nothing left
      seen = q->issued;
    }
    period = kPollPeriod;  // a call waited for this thread: look often again
    if (!run_oldest(*q, UINT64_MAX, true)) {
      std::unique_lock lk(q->m);
      q->wake.wait_for(lk, kPollPeriod);  // a call is running: look again at the next look
    }
  }
}

// Until `c` has run: runs what is queued up to it here, else sleeps until a call ends.
void wait_for(QueueCore& q, QueuedCall& c) {
  while (c.state.load(std::memory_order_acquire) != kDone) {
    if (run_oldest(q, c.seq)) continue;
    // Another thread runs it (or has just taken it).
    q.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t before = q.completions.load(std::memory_order_seq_cst);
    if (c.state.load(std::memory_order_seq_cst) != kDone) q.completions.wait(before);
    q.sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

void rethrow_if_failed(QueuedCall& c) {
  c.seen.store(true, std::memory_order_relaxed);
  if (c.error) std::rethrow_exception(c.error);
}

class CompletedRequest final : public Request::Pending {
 public:
  bool test() override { return true; }
  void wait() override {}
};

class FailedRequest final : public Request::Pending {
 public:
  explicit FailedRequest(std::exception_ptr error) : error_(std::move(error)) {}
  bool test() override { std::rethrow_exception(error_); }
  void wait() override { std::rethrow_exception(error_); }

 private:
  std::exception_ptr error_;
};

}  // namespace

bool test_call(QueuedCall& c) {
  if (c.state.load(std::memory_order_acquire) != kDone) return false;
  rethrow_if_failed(c);
  return true;
}

void wait_call(QueueCore& q, QueuedCall& c) {
  wait_for(q, c);
  rethrow_if_failed(c);
}

void wait_dropped_call(QueueCore& q, QueuedCall& c) noexcept {
  wait_for(q, c);
  if (!c.error || c.seen.load(std::memory_order_relaxed)) return;
  try {
    std::rethrow_exception(c.error);
  } catch (const std::exception& e) {
    SYNK_LOG_AT(warn, "a non-blocking " << c.what << " whose Request was dropped failed: "
                                        << e.what());
  } catch (...) {
  }
}

Request failed_request(std::exception_ptr error) {
  return Request(std::make_shared<FailedRequest>(std::move(error)));
}

Request completed_request() {
  static const auto done = std::make_shared<CompletedRequest>();  // one for every such call
  return Request(done);
}

CallQueue::CallQueue() : core_(std::make_shared<QueueCore>()) {}

CallQueue::~CallQueue() {
  {
    std::lock_guard lk(core_->m);
    core_->stop = true;
  }
  core_->wake.notify_all();
  if (core_->worker.joinable()) core_->worker.join();  // it returns once nothing is queued
  // A call that another thread's wait() took from the queue may still run: its end, before the
  // backend it runs on goes.
  std::lock_guard running(core_->exec);
}

void CallQueue::enqueue(QueuedCall& c) {
  bool wake = false;
  {
    std::lock_guard lk(core_->m);
    c.seq = ++core_->issued;
    core_->calls.push_back(&c);
    core_->queued.fetch_add(1, std::memory_order_release);
    wake = core_->asleep;
    if (!core_->worker.joinable()) core_->worker = std::thread(progress, core_.get());
  }
  if (wake) core_->wake.notify_one();
}

void CallQueue::run_in_order(const std::function<void()>& work) {
  QueueCore& q = *core_;
  std::unique_lock running(q.exec);  // the call running on another thread ends first
  if (q.queued.load(std::memory_order_acquire) != 0) {
    std::uint64_t up_to = 0;
    {
      std::lock_guard lk(q.m);
      up_to = q.issued;
    }
    while (QueuedCall* c = take_oldest(q, up_to)) execute(q, *c);
  }
  work();
}

}  // namespace synk::detail
