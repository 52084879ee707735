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

namespace synk::detail {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSlots = 64;  // threads that call; past that a thread's calls go unwatched

// A thread's calls. No clock is read in the call: it only counts (odd while inside a call), and
// the watchdog times how long it sees one odd count.
struct Slot {
  std::atomic<std::uint64_t> calls{0};  // stored last when armed (release): the rest is complete
  double timeout_s = 0;
  Collective coll = Collective::barrier;
  std::uint64_t count = 0;
  DataType dtype = DataType::uint8;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  int rank = 0;
  const char* backend = "";
};

// Never destroyed: the watchdog thread may look at them while the process exits.
Slot* const slots = new Slot[kSlots];
std::atomic<int> slots_used{0};
std::atomic<std::int64_t> shortest_timeout_ns{0};  // sets how often the watchdog looks
std::once_flag started;

[[noreturn]] void expire(const Slot& s, double waited_s) {
  const std::string text =
      "synk Timeout: rank " + std::to_string(s.rank) + ": " +
      describe_call(s.coll, s.count, s.dtype, s.op, s.root) + " on the " + s.backend +
      " backend has waited " + std::to_string(static_cast<long long>(waited_s)) +
      " s inside MPI, past SYNK_TIMEOUT (" + std::to_string(static_cast<long long>(s.timeout_s)) +
      " s). MPI cannot be interrupted, so this process ends (exit code " +
      std::to_string(kWatchdogExitCode) +
      ") and mpirun ends the job. Some rank is not in this call: stopped, busy elsewhere, or it "
      "rejected its own arguments (SYNK_CHECK_CALLS=1 makes that an error on every rank)\n";
  const ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
  std::_Exit(kWatchdogExitCode);
}

void watch() {
  std::uint64_t seen[kSlots] = {};     // the count last seen in each slot
  Clock::time_point since[kSlots] = {};  // when it was first seen
  while (true) {
    const std::int64_t period =
        std::clamp<std::int64_t>(shortest_timeout_ns.load() / 10, 10'000'000, 1'000'000'000);
    std::this_thread::sleep_for(std::chrono::nanoseconds(period));
    const Clock::time_point now = Clock::now();
    const int used = std::min(slots_used.load(), kSlots);
    for (int i = 0; i < used; ++i) {
      const std::uint64_t calls = slots[i].calls.load(std::memory_order_acquire);
      if (calls != seen[i]) {
        seen[i] = calls;
        since[i] = now;
        continue;
      }
      if (calls % 2 == 0) continue;  // not in a call
      // The grace lets synk's own deadlines inside the call (hier's shm steps) fire first, as
      // errors the program can catch.
      const double limit = slots[i].timeout_s + std::max(2.0, slots[i].timeout_s * 0.05);
      const double waited = std::chrono::duration<double>(now - since[i]).count();
      if (waited > limit) expire(slots[i], waited);
    }
  }
}

// This thread's slot, claimed by its first watched call; -1 when none is left.
int my_slot(double timeout_s) {
  thread_local const int slot = [timeout_s] {
    const auto ns = static_cast<std::int64_t>(timeout_s * 1e9);
    std::int64_t shortest = shortest_timeout_ns.load();
    while ((shortest == 0 || ns < shortest) &&
           !shortest_timeout_ns.compare_exchange_weak(shortest, ns)) {
    }
    const int i = slots_used.fetch_add(1);
    try {
      std::call_once(started, [] { std::thread(watch).detach(); });
    } catch (...) {  // no thread: the calls go unwatched, as before
    }
    return i < kSlots ? i : -1;
  }();
  return slot;
}

}  // namespace

MpiWatch::MpiWatch(const CollArgs& a, int rank, const char* backend, double timeout_s) noexcept
    : slot_(my_slot(timeout_s)) {
  if (slot_ < 0) return;
  Slot& s = slots[slot_];
  s.timeout_s = timeout_s;
  s.coll = a.coll;
  s.count = a.count;
  s.dtype = a.dtype;
  s.op = a.op;
  s.root = a.root;
  s.rank = rank;
  s.backend = backend;
  s.calls.store(s.calls.load(std::memory_order_relaxed) + 1, std::memory_order_release);  // odd
}

MpiWatch::~MpiWatch() {
  if (slot_ < 0) return;
  Slot& s = slots[slot_];
  s.calls.store(s.calls.load(std::memory_order_relaxed) + 1, std::memory_order_release);  // even
}

}  // namespace synk::detail
