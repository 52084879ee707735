// The step channel's steps: posting, waiting for peers, and checking the ranks' calls against
// each other (see step_channel.h for the model).
//
// Why reuse is safe. Data step k writes slot set k % 2, which data step k + 2 writes again; a
// rank's entry and StepCall of step s are written again at step s + kEagerDepth. Before
// writing, a rank waits until every peer's done counter reaches s - 2 (a slot step) or
// s - kEagerDepth (an eager step, which writes only its entry and StepCall). done >= t means
// the peer posted a later step (so it finished reading step t) and compared every call up to
// step t: nothing it may still read is rewritten.
//
// Why no wait hangs. A rank that only writes checks the others' calls later, so its done
// counter lags; every wait loop keeps catching up (catch_up) while it waits, so a rank waiting
// for this one's done is never blocked by this one waiting for it.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <utility>

#include "backends/shm/step_channel.h"
#include "backends/shm/stream_copy.h"
#include "core/mpi_watchdog.h"
#include "core/backoff.h"
#include "core/logging.h"
#include "core/mpi_runtime.h"
#include "synk/error.h"

namespace synk::shm {

using layout::block_at;
using layout::call_of;
using layout::StepCall;
using layout::Entry;
using layout::entry_of;

namespace {

// GroupConfig::sleep_when_waiting: after this long yielding, a waiting rank sleeps between
// polls (detail::sleep_pause: a late peer is noticed a little later; an idle wait costs no core).
constexpr auto kYieldBeforeSleep = std::chrono::microseconds(200);
// How long a rank that found a peer closed waits to see the peer's process end.
constexpr auto kClosedPeerExitGrace = std::chrono::seconds(1);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

constexpr std::uint64_t back_from(std::uint64_t step, std::uint64_t n) {
  return step > n ? step - n : 0;
}

// gatherv's and scatterv's counts differ by rank.
bool counts_differ(int coll) {
  return detail::counts_differ(static_cast<detail::Collective>(coll));
}

// Two ranks' calls of one step agree (their error codes are compared elsewhere).
bool same_call(const Call& a, const Call& b) {
  return a.coll == b.coll && a.dtype == b.dtype && a.op == b.op && a.root == b.root &&
         (a.count == b.count || counts_differ(a.coll)) && a.number == b.number;
}

// The same from the compact copies; false also where they cannot tell (a rejected call, whose
// text is in the entries, or a count too big for them): then the entries are compared.
bool same_call(const StepCall& a, const StepCall& b) {
  return a.error_code < 0 && b.error_code < 0 && a.coll == b.coll && a.dtype == b.dtype &&
         a.op == b.op && a.root == b.root && a.number == b.number &&
         (counts_differ(a.coll) || (a.count == b.count && a.count != StepCall::kCountTooBig));
}

}  // namespace

void StepChannel::next_step(bool eager, std::size_t eager_bytes) {
  const std::uint64_t s = seq_ + 1;
  // A later step of a call waits until the call's first step is checked against every rank:
  // on a mismatch every rank then throws after the same number of steps, and stays in step.
  const std::uint64_t first = seq_ >= call_first_step_ ? call_first_step_ : 0;
  // A rank running ahead checks (without waiting) long before it must: its done counter then
  // stays well ahead of what the others wait for, and they seldom look at its line.
  if (eager && checked_ < back_from(s, kEagerDepth / 2)) catch_up(seq_);
  wait_peers(back_from(s, eager ? kEagerDepth : 2), first);
  step_ = s;
  slot_step_ = false;
  tiny_ = eager && eager_bytes <= kTinyBytes;
}

void StepChannel::settle() {
  tiny_ = false;  // the step that follows (CMA's words) is a full one
  wait_peers(back_from(seq_ + 1, 2), seq_ >= call_first_step_ ? call_first_step_ : 0);
}

void StepChannel::post() {
  // What this step streamed into shared memory is visible first. Only the slot arena's copy_in
  // writes there (copy_out writes the caller's buffer, which the call's end fences).
  if (fence_posts_) stream_fence();
  const std::uint64_t s = seq_ + 1;
  wait_peers(back_from(s, kEagerDepth), 0);  // my entry of that step is rewritten now
  Entry& e = entry_of(blocks_, cfg_.rank, s);
  // Slot steps publish their words; an eager step's data is in its entry already.
  if (slot_step_) std::memcpy(e.data, words_, sizeof words_);
  e.call = call_;
  e.step.store(s, std::memory_order_release);
  StepCall& c = call_of(blocks_, cfg_.rank, s);  // a tiny step's data are in it already
  c.number = static_cast<std::uint32_t>(call_.number);
  c.count = call_.count < StepCall::kCountTooBig ? static_cast<std::uint32_t>(call_.count)
                                                 : StepCall::kCountTooBig;
  c.root = call_.root;
  c.coll = call_.coll;
  c.dtype = call_.dtype;
  c.op = call_.op;
  c.error_code = call_.error_code;
  c.step.store(s, std::memory_order_release);
  finished_ = seq_;  // a post means the reads of the step before are done
  seq_ = s;
  publish_done();
}

void StepChannel::sync() {
  post();
  arrive();
}

// A tiny step's data are in the peers' StepCalls, a full eager step's in their entries (a slot
// step's in the slots, found through the entries): the step a rank waits for is the one it reads
// next. Tiny steps carry their data two to a cache line (docs/shm-backend.md#compact-call-copies).
const std::atomic<std::uint64_t>& StepChannel::posted_word(int peer) const {
  return tiny_ ? call_of(blocks_, peer, seq_).step : entry_of(blocks_, peer, seq_).step;
}

void StepChannel::arrive() {
  for (int q = 0; q < cfg_.size; ++q) {
    if (q != cfg_.rank) wait_until(q, posted_word(q), seq_);
  }
  // A mismatch in this step throws; one in an earlier call waits for end().
  catch_up(seq_, tiny_ ? 0 : seq_);
}

void StepChannel::sync_with(int peer) {
  post();
  if (peer != cfg_.rank) {
    wait_until(peer, posted_word(peer), seq_);
    Mismatch m;
    const bool agree =
        tiny_ && same_call(call_of(blocks_, cfg_.rank, seq_), call_of(blocks_, peer, seq_));
    if (!agree && !entries_match(seq_, peer, &m)) {
      reported_ = seq_;  // what catch_up finds in this step later is said here, once
      throw Error(m.code, m.message);
    }
  }
  // With two ranks this costs nothing more (the one peer's entry, or StepCall, is at hand);
  // with more, the others' calls are checked in batches, by next_step.
  if (cfg_.size <= 2) catch_up(seq_, tiny_ ? 0 : seq_);
}

// A peer has posted step t when its StepCall of t holds t (stored after its entry): neither is
// rewritten (with t + kEagerDepth) before this rank is done with t, and this rank asks only
// about steps it is not done with.
bool StepChannel::posted(int peer, std::uint64_t t) const {
  return call_of(blocks_, peer, t).step.load(std::memory_order_acquire) >= t;
}

unsigned char* StepChannel::eager_out() {
  return tiny_ ? call_of(blocks_, cfg_.rank, seq_ + 1).data
               : entry_of(blocks_, cfg_.rank, seq_ + 1).data;
}

const unsigned char* StepChannel::eager_in(int peer) const {
  return tiny_ ? call_of(blocks_, peer, seq_).data : entry_of(blocks_, peer, seq_).data;
}

void StepChannel::wait_peers(std::uint64_t done_target, std::uint64_t check_target) {
  check_target = std::max(check_target, done_target);
  if (checked_ < check_target) {
    for (int q = 0; q < cfg_.size; ++q) {
      if (q != cfg_.rank)
        wait_until(q, call_of(blocks_, q, check_target).step, check_target);
    }
    catch_up(seq_);  // as far as the peers have posted: checks come in batches
  }
  if (peers_done_ >= done_target) return;
  std::uint64_t least = ~std::uint64_t{0};
  for (int q = 0; q < cfg_.size; ++q) {
    if (q == cfg_.rank) continue;
    const auto& done = block_at(blocks_, q).done;
    if (done.load(std::memory_order_acquire) < done_target)
      wait_until(q, done, done_target);
    least = std::min(least, done.load(std::memory_order_acquire));
  }
  peers_done_ = least;
}

// Steps this rank did not read are compared by their StepCalls, a line for two steps (and by
// the entries, for the messages, only where they differ); the step it has just read
// (at_hand) by the entries, which are in its cache then: comparing every peer's entry, each a
// line the peer had just written, cost the root of a small broadcast a miss a step
// (docs/shm-backend.md#compact-call-copies).
void StepChannel::catch_up(std::uint64_t limit, std::uint64_t at_hand) {
  limit = std::min(limit, seq_);
  while (checked_ < limit) {
    const std::uint64_t t = checked_ + 1;
    const bool by_entries = t == at_hand;
    const StepCall& mine = call_of(blocks_, cfg_.rank, t);
    bool agree = !by_entries;
    for (int q = 0; q < cfg_.size; ++q) {
      if (q == cfg_.rank || by_entries) continue;
      if (!posted(q, t)) {
        publish_done();
        return;
      }
      agree = agree && same_call(mine, call_of(blocks_, q, t));
    }
    Mismatch m;
    const bool ok = agree || entries_match(t, -1, &m);
    checked_ = t;
    if (!ok && t != reported_) report(t, std::move(m));
  }
  publish_done();
}

void StepChannel::report(std::uint64_t step, Mismatch&& m) {
  reported_ = step;
  if (step >= call_first_step_) {
    publish_done();
    throw Error(m.code, m.message);
  }
  if (!deferred_) {
    deferred_ = true;
    deferred_error_ = std::move(m);
  }
}

void StepChannel::publish_done() {
  const std::uint64_t done = std::min(checked_, finished_);
  if (done <= published_done_) return;
  published_done_ = done;
  block_at(blocks_, cfg_.rank).done.store(done, std::memory_order_release);
}

// Every rank compares the same entries, so a mismatch is found alike everywhere: the rank with
// rejected arguments throws its own error, the others a Remote error naming it, or all the
// same "mismatched calls" naming the first differing pair.
bool StepChannel::entries_match(std::uint64_t step, int peer, Mismatch* m) const {
  const Entry& mine = entry_of(blocks_, cfg_.rank, step);
  const auto name = [&] {  // this call's name (a hier step's is its caller's), or an earlier's
    return mine.call.number == call_.number
               ? std::string(op_name_)
               : std::string(detail::to_string(static_cast<detail::Collective>(mine.call.coll)));
  };
  const int lo = peer < 0 ? 0 : peer, hi = peer < 0 ? cfg_.size : peer + 1;
  const std::size_t slot = step % kEagerDepth;
  if (mine.call.error_code >= 0) {
    *m = {static_cast<ErrorCode>(mine.call.error_code), block_at(blocks_, cfg_.rank).errors[slot]};
    return false;
  }
  for (int q = lo; q < hi; ++q) {
    const int code = entry_of(blocks_, q, step).call.error_code;
    if (code >= 0) {
      // A rank that failed before this step (hier: its node leader's MPI call between the
      // nodes) rejects it too, and is not said to have rejected its arguments.
      const bool failed = code == static_cast<int>(ErrorCode::Backend) ||
                          code == static_cast<int>(ErrorCode::System);
      *m = {ErrorCode::Remote, name() + ": rank " + std::to_string(q) +
                                   (failed ? " failed: " : " rejected its arguments: ") +
                                   block_at(blocks_, q).errors[slot]};
      return false;
    }
  }
  for (int q = lo; q < hi; ++q) {
    if (!same_call(mine.call, entry_of(blocks_, q, step).call)) {
      const int first = std::min(q, cfg_.rank), second = std::max(q, cfg_.rank);
      *m = {ErrorCode::InvalidUsage, name() + ": mismatched calls: rank " + std::to_string(first) +
                                         " called " + describe_call(first, step) + ", rank " +
                                         std::to_string(second) + " called " +
                                         describe_call(second, step)};
      return false;
    }
  }
  return true;
}

void StepChannel::wait_until(int peer, const std::atomic<std::uint64_t>& word,
                             std::uint64_t target) {
  for (int i = 0; i < spin_iterations_; ++i) {
    if (word.load(std::memory_order_acquire) >= target) return;
    cpu_relax();
  }
  if (!spin_decided_) decide_spin();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto deadline = start + detail::wait_duration(cfg_.timeout_s);
  std::uint64_t peer_progress = block_at(blocks_, peer).progress.load(std::memory_order_relaxed);
  auto next_liveness_check = start + std::chrono::milliseconds(10);
  // Where every rank has a CPU of its own, polls go on for spin_before_yield_ before the
  // first yield, which may hand this core to another process for a time slice (cpu_share.h).
  const auto spin_until = start + spin_before_yield_;
  const auto sleep_after = start + kYieldBeforeSleep;
  bool warn_pending = cfg_.stall_warn_s < cfg_.timeout_s;
  const auto warn_at = start + detail::wait_duration(cfg_.stall_warn_s);
  bool yielding = spin_before_yield_.count() == 0;
  bool sleeping = false;
  for (std::uint32_t i = 1;; ++i) {
    if (sleeping) {
      std::this_thread::sleep_for(detail::sleep_pause(Clock::now() - start));
    } else if (yielding) {
      sched_yield();
    } else {
      cpu_relax();
    }
    if (word.load(std::memory_order_acquire) >= target) return;
    catch_up(seq_);  // while this rank waits, the ones waiting for its done go on
    if ((i & 31) != 0) continue;
    const auto now = Clock::now();
    yielding = yielding || now >= spin_until;
    sleeping = cfg_.sleep_when_waiting && now >= sleep_after;
    if (now >= next_liveness_check) {
      next_liveness_check = now + std::chrono::milliseconds(10);
      // Closed first: a peer that closed and then ended exited, it did not die.
      if (block_at(blocks_, peer).closed.load(std::memory_order_acquire) != 0 &&
          word.load(std::memory_order_acquire) < target) {
        throw_closed(peer);
      }
      if (!peer_alive(peer) && word.load(std::memory_order_acquire) < target) throw_died(peer);
      throw_if_a_lagging_peer_died(peer);
    }
    if (warn_pending && now >= warn_at) {
      warn_pending = false;
      SYNK_LOG_AT(warn, op_name_ << ": rank " << cfg_.rank_text(cfg_.rank) << " has waited "
                                 << detail::seconds_text(cfg_.stall_warn_s)
                                 << " (SYNK_STALL_WARN) for " << late_peer_text(peer)
                                 << "; it fails after " << detail::seconds_text(cfg_.timeout_s)
                                 << " (SYNK_TIMEOUT)");
    }
    if (now >= deadline && peer_moved_on(peer, peer_progress)) {
      deadline = now + detail::wait_duration(cfg_.timeout_s);  // SYNK_TIMEOUT bounds a part
      detail::mpi_watch_progress();  // and so for a watched call (hier's): this wait moved on
    } else if (now >= deadline) {
      mark_broken();
      throw Error(ErrorCode::Timeout, std::string(op_name_) + ": rank " +
                                          cfg_.rank_text(cfg_.rank) + " waited " +
                                          detail::seconds_text(cfg_.timeout_s) +
                                          " (SYNK_TIMEOUT) for " + late_peer_text(peer));
    }
  }
}

// The second text names no rank as the late one (synkrun blames the rank a Timeout names): the
// peer reached this call and waits inside MPI for another node's rank, which it cannot name.
std::string StepChannel::late_peer_text(int peer) const {
  const std::string rank = cfg_.rank_text(peer);
  if (block_at(blocks_, peer).outside.load(std::memory_order_acquire) != 0) {
    return "this call's step between the nodes, where rank " + rank +
           " has made no progress inside MPI (it, or a rank of another node it waits for, is "
           "stopped, cut off, or not in this call)";
  }
  return "rank " + rank + ", which has not reached this call";
}

bool StepChannel::set_outside(bool outside) {
  return block_at(blocks_, cfg_.rank).outside.exchange(outside ? 1 : 0,
                                                        std::memory_order_release) != 0;
}

void StepChannel::note_progress() {
  block_at(blocks_, cfg_.rank).progress.fetch_add(1, std::memory_order_relaxed);
}

// Whether `peer` noted progress since `seen` (which it updates): a peer still at work outside
// the group (a hier leader between the nodes, chunk by chunk) is not a stuck one.
bool StepChannel::peer_moved_on(int peer, std::uint64_t& seen) const {
  const std::uint64_t now = block_at(blocks_, peer).progress.load(std::memory_order_relaxed);
  if (now == seen) return false;
  seen = now;
  return true;
}

void StepChannel::throw_died(int peer) {
  mark_broken();
  throw Error(ErrorCode::Remote,
              std::string(op_name_) + ": rank " + cfg_.rank_text(peer) + " (pid " +
                  std::to_string(block_at(blocks_, peer).pid.load()) + ") died; rank " +
                  cfg_.rank_text(cfg_.rank) + " was waiting for it");
}

// A rank whose program ends (an exception, sys.exit) closes its communicators on the way out:
// given a moment to end, it is named as the one that exited, and mpirun sees its exit code
// before this rank's own failure.
bool StepChannel::peer_ends_soon(int peer) const {
  const auto until = std::chrono::steady_clock::now() + kClosedPeerExitGrace;
  while (peer_alive(peer)) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void StepChannel::throw_closed(int peer) {
  if (block_at(blocks_, peer).closed.load(std::memory_order_acquire) ==
      layout::kClosedAfterFailure) {
    throw_failed_and_closed(peer);
  }
  if (peer_ends_soon(peer)) {
    mark_broken();
    throw Error(ErrorCode::Remote,
                std::string(op_name_) + ": rank " + cfg_.rank_text(peer) +
                    " (pid " + std::to_string(block_at(blocks_, peer).pid.load()) +
                    ") exited before it reached this call; rank " +
                    cfg_.rank_text(cfg_.rank) +
                    " was waiting for it (rank " + cfg_.rank_text(peer) +
                    "'s own output says why)");
  }
  broken_ = true;  // but no peer is lost: the one that left is still up, or in MPI_Finalize
  throw Error(ErrorCode::InvalidUsage,
              std::string(op_name_) + ": rank " + cfg_.rank_text(peer) +
                  " closed this communicator (destroyed it, or called MPI_Finalize) before it "
                  "reached this call; rank " + cfg_.rank_text(cfg_.rank) +
                  " was waiting for it. Every rank makes the same calls before it closes one");
}

// The peer was in step (it may have been inside this very call) until a call of its failed:
// most often it waited past SYNK_TIMEOUT for this rank, which came late. Not a call-order bug.
void StepChannel::throw_failed_and_closed(int peer) {
  const bool exited = peer_ends_soon(peer);
  mark_broken();
  throw Error(ErrorCode::Remote,
              std::string(op_name_) + ": rank " + cfg_.rank_text(peer) +
                  " gave up on this communicator after a call of its failed, and " +
                  (exited ? "exited" : "closed it") + "; rank " +
                  cfg_.rank_text(cfg_.rank) + " was waiting for it (rank " +
                  cfg_.rank_text(peer) +
                  "'s own output says why; a rank that waited past SYNK_TIMEOUT for this one "
                  "gives up so)");
}

void StepChannel::throw_if_a_lagging_peer_died(int waited) {
  for (int q = 0; q < cfg_.size; ++q) {
    if (q == cfg_.rank || q == waited) continue;
    const std::uint64_t posted = call_of(blocks_, q, seq_).step.load(std::memory_order_acquire);
    if (posted >= seq_) continue;
    // Closed first, as in wait_until: one that closed and then ended exited, it did not die.
    if (block_at(blocks_, q).closed.load(std::memory_order_acquire) != 0) throw_closed(q);
    if (!peer_alive(q)) throw_died(q);
  }
}

}  // namespace synk::shm
