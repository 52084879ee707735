// See mpi_watchdog.h. A slot per thread that has made a watched call (kept for the thread's
// life); the watchdog thread, started with the first call, looks at the slots every tenth of
// the shortest deadline (from 10 ms to 1 s), and ends the process when one has stayed inside
// the same call past it.
#include "core/mpi_watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/backoff.h"
#include "core/call_label.h"
#include "core/env.h"
#include "core/job_rank_text.h"
#include "core/logging.h"
#include "core/mpi_runtime.h"

namespace synk::detail {

// What the watchdog shows of a stuck call or step.
struct WatchedCall {
  double timeout_s = 0;
  Collective coll = Collective::barrier;
  std::uint64_t count = 0;
  DataType dtype = DataType::uint8;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  int rank = 0;
  const char* backend = "";
  bool calls_checked = false;  // compared across the ranks before it ran
  bool at_issue = false;       // a non-blocking call run at issue (CollArgs::at_issue)
  const char* step = nullptr;  // a step that is no call (MpiWatch's second form), or null
  CallLabel label = CallLabel::user;  // what the call is part of, when synk made it
};

// A thread's calls. No clock is read in the call: it only counts (odd while inside a call), and
// the watchdog times how long it sees one odd count. The fields are atomics since the watchdog
// may read them while the owner moves on to its next call; it keeps what it read only if the
// count has not changed meanwhile (as a seqlock's reader does).
struct WatchSlot {
  std::atomic<bool> taken{false};  // by a thread, until it exits
  // Odd inside a call; +2 at each progress. Stored last when armed (release): the rest is
  // complete.
  std::atomic<std::uint64_t> calls{0};
  std::atomic<double> timeout_s{0};
  std::atomic<Collective> coll{Collective::barrier};
  std::atomic<std::uint64_t> count{0};
  std::atomic<DataType> dtype{DataType::uint8};
  std::atomic<ReduceOp> op{ReduceOp::sum};
  std::atomic<int> root{0};
  std::atomic<int> rank{0};
  std::atomic<const char*> backend{""};
  std::atomic<bool> calls_checked{false};
  std::atomic<bool> at_issue{false};
  std::atomic<const char*> step{nullptr};
  std::atomic<CallLabel> label{CallLabel::user};

  // The call this slot held when its count was `seen`, or nothing if it has moved on since.
  std::optional<WatchedCall> read(std::uint64_t seen) const {
    constexpr auto r = std::memory_order_relaxed;
    WatchedCall c{timeout_s.load(r), coll.load(r),     count.load(r),         dtype.load(r),
                  op.load(r),        root.load(r),     rank.load(r),          backend.load(r),
                  calls_checked.load(r), at_issue.load(r), step.load(r), label.load(r)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (calls.load(r) != seen) return std::nullopt;
    return c;
  }
};

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSlots = 64;  // threads that call; past that a thread's calls go unwatched
// Ranks reach a communicator's start when their own start-up is done (a data set loaded, a
// module imported), seconds apart: a step waits at least this long, whatever SYNK_TIMEOUT.
constexpr double kStepTimeoutFloor = 10.0;

// Never destroyed: the watchdog thread may look at them while the process exits.
WatchSlot* const slots = new WatchSlot[kSlots];
std::atomic<int> slots_used{0};  // the highest slot ever taken + 1
std::atomic<std::int64_t> shortest_timeout_ns{0};  // sets how often the watchdog looks
std::once_flag started;

// "1", or "1 (job rank 3)" where this process's rank in the communicator is not its rank in
// MPI_COMM_WORLD.
std::string rank_of_process_text(int rank) {
  return rank_with_job_rank(rank, job_rank_of_process());
}

// What a stuck step that is no call says (making a communicator, split, alloc).
// "rank 3", or "this process" before MPI (and the launcher) could say its rank.
std::string who(const WatchedCall& c) {
  return c.rank >= 0 ? "rank " + rank_of_process_text(c.rank) : "this process";
}

std::string step_expired_text(const WatchedCall& c, double waited_s) {
  return "synk Timeout: " + who(c) + ": " + c.step + " has waited " +
         std::to_string(static_cast<long long>(waited_s)) +
         " s inside MPI without progress, past its deadline (" + seconds_text(c.timeout_s) +
         ": SYNK_TIMEOUT, at least " +
         std::to_string(static_cast<long long>(kStepTimeoutFloor)) +
         " s for such a step). MPI cannot be interrupted, so this process ends (exit code " +
         std::to_string(kWatchdogExitCode) +
         ") and mpirun ends the job. Every rank takes this step together (as MPI_Init_thread, "
         "MPI_Comm_dup and MPI_Comm_split): some rank has not, stopped or busy elsewhere.\n";
}

std::string call_expired_text(const WatchedCall& c, double waited_s) {
  std::string text =
      "synk Timeout: rank " + rank_of_process_text(c.rank) + ": " +
      labeled_call(c.label, describe_call(c.coll, c.count, c.dtype, c.op, c.root)) + " on the " +
      c.backend +
      " backend has waited " + std::to_string(static_cast<long long>(waited_s)) +
      " s inside MPI without progress, past SYNK_TIMEOUT (" + seconds_text(c.timeout_s) +
      "). MPI cannot be interrupted, so this process ends (exit code " +
      std::to_string(kWatchdogExitCode) +
      ") and mpirun ends the job. Some rank is not in this call: stopped, or busy elsewhere";
  text += c.calls_checked ? ""
               : ", or it rejected its own arguments (SYNK_CHECK_CALLS=1 makes that an error on "
                 "every rank)";
  if (c.at_issue) text += kAtIssueHint;
  return text + ".\n";
}

void expire(const WatchSlot& s, std::uint64_t calls, double waited_s) {
  const std::optional<WatchedCall> c = s.read(calls);
  if (!c) return;
  const std::string text =
      c->step ? step_expired_text(*c, waited_s) : call_expired_text(*c, waited_s);
  // The call may have ended while the text was made: then it is not stuck.
  if (s.calls.load(std::memory_order_acquire) != calls) return;
  const ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
  std::_Exit(kWatchdogExitCode);
}

// SYNK_STALL_WARN: one line, the call going on (it may still end well).
void warn_stalled(const WatchSlot& s, std::uint64_t calls, double waited_s) {
  const std::optional<WatchedCall> c = s.read(calls);
  if (!c) return;
  if (c->step != nullptr) {
    SYNK_LOG_AT(warn, who(*c) << ": " << c->step << " has waited "
                              << static_cast<long long>(waited_s)
                              << " s inside MPI (SYNK_STALL_WARN): some rank has not taken "
                                 "this step; this process ends after "
                              << seconds_text(c->timeout_s));
    return;
  }
  SYNK_LOG_AT(warn, "rank " << c->rank << ": "
                            << labeled_call(c->label,
                                            describe_call(c->coll, c->count, c->dtype, c->op,
                                                          c->root))
                            << " on the " << c->backend << " backend has waited "
                            << static_cast<long long>(waited_s)
                            << " s inside MPI (SYNK_STALL_WARN): some rank has not reached it; "
                               "this process ends after SYNK_TIMEOUT ("
                            << seconds_text(c->timeout_s) << ")");
}

void watch() {
  // A malformed variable is the Communicator's error to report (a program may catch it and go
  // on without synk): this thread takes the default rather than end the process.
  const double stall_warn_s = settings_or_defaults().stall_warn_s;
  std::uint64_t seen[kSlots] = {};     // the count last seen in each slot
  std::uint64_t warned[kSlots] = {};   // the count of the last call warned of
  Clock::time_point since[kSlots] = {};  // when it was first seen
  Clock::time_point last = Clock::now();
  while (true) {
    const std::int64_t period =
        std::clamp<std::int64_t>(shortest_timeout_ns.load() / 10, 10'000'000, 1'000'000'000);
    std::this_thread::sleep_for(std::chrono::nanoseconds(period));
    const Clock::time_point now = Clock::now();
    // Far more than a period since the last look: the process was stopped (SIGSTOP, a suspended
    // job, a debugger), and the other ranks with it, most likely. The waits count from now.
    const bool resumed = now - last > std::chrono::nanoseconds(5 * period) + std::chrono::seconds(1);
    last = now;
    const int used = std::min(slots_used.load(), kSlots);
    for (int i = 0; i < used; ++i) {
      const std::uint64_t calls = slots[i].calls.load(std::memory_order_acquire);
      if (calls != seen[i] || resumed) {
        seen[i] = calls;
        since[i] = now;
        continue;
      }
      if (calls % 2 == 0) continue;  // not in a call
      // The grace lets synk's own deadlines inside the call (hier's shm steps) fire first, as
      // errors the program can catch.
      const double timeout_s = slots[i].timeout_s.load(std::memory_order_relaxed);
      const double limit = timeout_s + std::max(2.0, timeout_s * 0.05);
      const double waited = std::chrono::duration<double>(now - since[i]).count();
      if (waited > limit) expire(slots[i], calls, waited);
      if (waited > stall_warn_s && warned[i] != calls && stall_warn_s < timeout_s) {
        warned[i] = calls;
        warn_stalled(slots[i], calls, waited);
      }
    }
  }
}

// The watchdog looks every tenth of the shortest deadline of the watches armed so far (a
// thread's first, a step's, may be longer than its calls').
void note_timeout(double timeout_s) {
  const auto ns = static_cast<std::int64_t>(timeout_s * 1e9);
  std::int64_t shortest = shortest_timeout_ns.load(std::memory_order_relaxed);
  while ((shortest == 0 || ns < shortest) &&
         !shortest_timeout_ns.compare_exchange_weak(shortest, ns)) {
  }
}

// A thread's slot, taken by its first watched call and given back when the thread ends (its
// count only grows, so the next owner's calls never look like this one's).
struct ThreadSlot {
  int index = -1;
  ThreadSlot() {
    for (int i = 0; i < kSlots && index < 0; ++i) {
      bool free = false;
      if (slots[i].taken.compare_exchange_strong(free, true)) index = i;
    }
    if (index < 0) {
      SYNK_LOG_AT(warn, "the watchdog of calls inside MPI has no slot left for this thread ("
                            << kSlots << " threads call at once): its calls have no deadline");
      return;
    }
    int used = slots_used.load();
    while (used < index + 1 && !slots_used.compare_exchange_weak(used, index + 1)) {
    }
    try {
      std::call_once(started, [] { std::thread(watch).detach(); });
    } catch (const std::exception& e) {
      SYNK_LOG_AT(warn, "the watchdog of calls inside MPI could not start ("
                            << e.what() << "): calls on the mpi backend have no deadline");
    }
  }
  ~ThreadSlot() {
    if (index >= 0) slots[index].taken.store(false, std::memory_order_release);
  }
};

ThreadSlot& my_slot(double timeout_s) {
  note_timeout(timeout_s);
  thread_local ThreadSlot slot;
  return slot;
}

thread_local WatchSlot* armed = nullptr;  // this thread's slot while inside a watched call

// Only the slot's own thread writes its count; the watchdog reads it.
void advance(WatchSlot& s, std::uint64_t by) {
  s.calls.store(s.calls.load(std::memory_order_relaxed) + by, std::memory_order_release);
}

}  // namespace

void mpi_watch_progress() noexcept {
  if (armed) advance(*armed, 2);  // still odd
}

MpiWatch::MpiWatch(const CollArgs& a, int rank, const char* backend, bool calls_checked,
                   double timeout_s)
    : slot_(armed != nullptr ? -1 : my_slot(timeout_s).index) {
  if (slot_ < 0) return;
  WatchSlot& s = slots[slot_];
  // The last call's even count before these fields (the writer's side of the seqlock).
  std::atomic_thread_fence(std::memory_order_release);
  constexpr auto r = std::memory_order_relaxed;
  s.timeout_s.store(timeout_s, r);
  s.step.store(nullptr, r);
  s.coll.store(a.coll, r);
  s.count.store(a.count, r);
  s.dtype.store(a.dtype, r);
  s.op.store(a.op, r);
  s.root.store(a.root, r);
  s.rank.store(rank, r);
  s.backend.store(backend, r);
  s.calls_checked.store(calls_checked, r);
  s.at_issue.store(a.at_issue, r);
  s.label.store(a.label, r);
  advance(s, 1);  // odd: inside a call
  armed_cell_ = &armed;
  *armed_cell_ = &s;
}

MpiWatch::MpiWatch(const char* step, int rank, double timeout_s)
    : slot_(armed != nullptr ? -1 : my_slot(std::max(timeout_s, kStepTimeoutFloor)).index) {
  if (slot_ < 0) return;
  WatchSlot& s = slots[slot_];
  std::atomic_thread_fence(std::memory_order_release);  // as in the first form
  s.timeout_s.store(std::max(timeout_s, kStepTimeoutFloor), std::memory_order_relaxed);
  s.step.store(step, std::memory_order_relaxed);
  s.rank.store(rank, std::memory_order_relaxed);
  s.at_issue.store(false, std::memory_order_relaxed);
  advance(s, 1);  // odd: inside a step
  armed_cell_ = &armed;
  *armed_cell_ = &s;
}

MpiWatch::~MpiWatch() {
  if (slot_ < 0) return;
  *armed_cell_ = nullptr;
  advance(slots[slot_], 1);  // even: out of it
}

MpiWatch watch_step(const char* step, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // A setting that cannot be read fails the communicator's start, which this may watch.
  return MpiWatch(step, rank, settings_or_defaults().timeout_s);
}

}  // namespace synk::detail
