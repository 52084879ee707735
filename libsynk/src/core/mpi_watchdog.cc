// See mpi_watchdog.h. A slot per thread that has made a watched call (kept for the thread's
// life); the watchdog thread, started with the first call, looks at the slots ten times per
// deadline, and ends the process when one has stayed inside the same call past it.
#include "core/mpi_watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "core/backoff.h"
#include "core/env.h"
#include "core/logging.h"

namespace synk::detail {

// A thread's calls. No clock is read in the call: it only counts (odd while inside a call), and
// the watchdog times how long it sees one odd count.
struct WatchSlot {
  std::atomic<bool> taken{false};       // by a thread, until it exits
  // Odd inside a call; +2 at each progress. Stored last when armed (release): the rest is
  // complete.
  std::atomic<std::uint64_t> calls{0};
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
  // A step that is no call (MpiWatch's second form), or null; read once by the watchdog, which
  // may look while the owner moves on to a call.
  std::atomic<const char*> step{nullptr};
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

// What a stuck step that is no call says (making a communicator, split, alloc).
std::string step_expired_text(const WatchSlot& s, const char* step, double waited_s) {
  return "synk Timeout: rank " + std::to_string(s.rank) + ": " + step + " has waited " +
         std::to_string(static_cast<long long>(waited_s)) +
         " s inside MPI without progress, past its deadline (" +
         std::to_string(static_cast<long long>(s.timeout_s)) + " s: SYNK_TIMEOUT, at least " +
         std::to_string(static_cast<long long>(kStepTimeoutFloor)) +
         " s for such a step). MPI cannot be interrupted, so this process ends (exit code " +
         std::to_string(kWatchdogExitCode) +
         ") and mpirun ends the job. Every rank of the communicator takes this step together "
         "(as MPI_Comm_dup and MPI_Comm_split): some rank has not, stopped or busy elsewhere.\n";
}

void expire(const WatchSlot& s, std::uint64_t calls, double waited_s) {
  if (const char* step = s.step.load(std::memory_order_relaxed); step != nullptr) {
    const std::string text = step_expired_text(s, step, waited_s);
    if (s.calls.load(std::memory_order_acquire) != calls) return;
    const ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
    (void)ignored;
    std::_Exit(kWatchdogExitCode);
  }
  std::string text =
      "synk Timeout: rank " + std::to_string(s.rank) + ": " +
      describe_call(s.coll, s.count, s.dtype, s.op, s.root) + " on the " + s.backend +
      " backend has waited " + std::to_string(static_cast<long long>(waited_s)) +
      " s inside MPI without progress, past SYNK_TIMEOUT (" + std::to_string(static_cast<long long>(s.timeout_s)) +
      " s). MPI cannot be interrupted, so this process ends (exit code " +
      std::to_string(kWatchdogExitCode) +
      ") and mpirun ends the job. Some rank is not in this call: stopped, or busy elsewhere";
  text += s.calls_checked ? ""
               : ", or it rejected its own arguments (SYNK_CHECK_CALLS=1 makes that an error on "
                 "every rank)";
  if (s.at_issue) text += kAtIssueHint;
  text += ".\n";
  // The call may have ended while the text was made: then it is not stuck.
  if (s.calls.load(std::memory_order_acquire) != calls) return;
  const ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
  std::_Exit(kWatchdogExitCode);
}

// SYNK_STALL_WARN: one line, the call going on (it may still end well).
void warn_stalled(const WatchSlot& s, double waited_s) {
  if (const char* step = s.step.load(std::memory_order_relaxed); step != nullptr) {
    SYNK_LOG_AT(warn, "rank " << s.rank << ": " << step << " has waited "
                              << static_cast<long long>(waited_s)
                              << " s inside MPI (SYNK_STALL_WARN): some rank has not taken "
                                 "this step; this process ends after "
                              << seconds_text(s.timeout_s));
    return;
  }
  SYNK_LOG_AT(warn, "rank " << s.rank << ": " << describe_call(s.coll, s.count, s.dtype, s.op, s.root)
                            << " on the " << s.backend << " backend has waited "
                            << static_cast<long long>(waited_s)
                            << " s inside MPI (SYNK_STALL_WARN): some rank has not reached it; "
                               "this process ends after SYNK_TIMEOUT ("
                            << seconds_text(s.timeout_s) << ")");
}

void watch() {
  const double stall_warn_s = settings().stall_warn_s;
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
      const double limit = slots[i].timeout_s + std::max(2.0, slots[i].timeout_s * 0.05);
      const double waited = std::chrono::duration<double>(now - since[i]).count();
      if (waited > limit) expire(slots[i], calls, waited);
      if (waited > stall_warn_s && warned[i] != calls && stall_warn_s < slots[i].timeout_s) {
        warned[i] = calls;
        warn_stalled(slots[i], waited);
      }
    }
  }
}

// The watchdog looks ten times per the shortest deadline of the watches armed so far (a
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
  s.timeout_s = timeout_s;
  s.step.store(nullptr, std::memory_order_relaxed);
  s.coll = a.coll;
  s.count = a.count;
  s.dtype = a.dtype;
  s.op = a.op;
  s.root = a.root;
  s.rank = rank;
  s.backend = backend;
  s.calls_checked = calls_checked;
  s.at_issue = a.at_issue;
  advance(s, 1);  // odd: inside a call
  armed_cell_ = &armed;
  *armed_cell_ = &s;
}

MpiWatch::MpiWatch(const char* step, int rank, double timeout_s)
    : slot_(armed != nullptr ? -1 : my_slot(std::max(timeout_s, kStepTimeoutFloor)).index) {
  if (slot_ < 0) return;
  WatchSlot& s = slots[slot_];
  s.timeout_s = std::max(timeout_s, kStepTimeoutFloor);
  s.step.store(step, std::memory_order_relaxed);
  s.rank = rank;
  s.at_issue = false;
  advance(s, 1);  // odd: inside a step
  armed_cell_ = &armed;
  *armed_cell_ = &s;
}

MpiWatch::~MpiWatch() {
  if (slot_ < 0) return;
  *armed_cell_ = nullptr;
  advance(slots[slot_], 1);  // even: out of it
}

}  // namespace synk::detail
