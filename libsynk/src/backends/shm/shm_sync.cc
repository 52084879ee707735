// shm::Group's steps: posting, waiting for peers, and checking the ranks' calls against each
// other (see shm_group.h for the model).
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
#include <string>
#include <thread>
#include <utility>

#include "backends/shm/shm_group.h"
#include "backends/shm/shm_layout.h"
#include "backends/shm/stream_copy.h"
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

// GroupConfig::sleep_when_waiting: after this long yielding, a waiting rank sleeps this long
// between polls (a late peer is noticed that much later; an idle wait costs no core).
constexpr auto kYieldBeforeSleep = std::chrono::microseconds(200);
constexpr auto kSleepBetweenPolls = std::chrono::microseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

constexpr std::uint64_t back_from(std::uint64_t step, std::uint64_t n) {
  return step > n ? step - n : 0;
}

constexpr int kGatherv = static_cast<int>(detail::Collective::gatherv);

// Two ranks' calls of one step agree (their error codes are compared elsewhere). gatherv's
// counts differ by rank.
bool same_call(const Group::Call& a, const Group::Call& b) {
  return a.coll == b.coll && a.dtype == b.dtype && a.op == b.op && a.root == b.root &&
         (a.count == b.count || a.coll == kGatherv) && a.number == b.number;
}

// The same from the compact copies; false also where they cannot tell (a rejected call, whose
// text is in the entries, or a count too big for them): then the entries are compared.
bool same_call(const StepCall& a, const StepCall& b) {
  return a.error_code < 0 && b.error_code < 0 && a.coll == b.coll && a.dtype == b.dtype &&
         a.op == b.op && a.root == b.root && a.number == b.number &&
         (a.coll == kGatherv || (a.count == b.count && a.count != StepCall::kCountTooBig));
}

}  // namespace

void Group::next_step(bool eager, std::size_t eager_bytes) {
  const std::uint64_t s = seq_ + 1;
  // A later step of a call waits until the call's first step is checked against every rank:
  // on a mismatch every rank then throws after the same number of steps, and stays in step.
  const std::uint64_t first = seq_ >= call_first_step_ ? call_first_step_ : 0;
  // A rank running ahead checks (without waiting) long before it must: its done counter then
  // stays well ahead of what the others wait for, and they seldom look at its line.
  if (eager && checked_ < back_from(s, kEagerDepth / 2)) catch_up(seq_);
  wait_peers(back_from(s, eager ? kEagerDepth : 2), first);
  ++step_;
  slot_offset_ = 0;
  shifted_ = false;
  slot_step_ = false;
  tiny_ = eager && eager_bytes <= kTinyBytes;
  offer_id_ = 0;
  offer_off_ = 0;
  own_shift_ = 0;
  own_dst_shift_ = 0;
  result_shift_ = 0;
}

// Why the offset walks. A rank that rewrites lines its reader still holds in its cache (it
// read them one use of the set ago) has to take each line back from that cache first: here a
// 64 KiB slot write took 7.4 us that way against 1.2 us for the same copy into lines nobody
// else holds. Placing each use of a set further along the slot leaves 2 MiB per rank (both
// sets) between two writes of the same line, more than a core's L2 here, so the reader has
// mostly let them go by then. synk-bench, 2 ranks, against the slot's start, launches
// alternated: all_gather of 64 KiB 5.3 -> 2.6 us, of 256 KiB 18.5 -> 9.7; all_reduce of 64 KiB
// 8.5-9.2 -> 4.4-4.7; broadcast of 256 KiB 18.8 -> 11.4-12.5; reduce of 256 KiB 27-29 -> 16-19;
// from 1 MiB, where a step fills the slot, nothing changes. Every rank computes the same offset
// from the step count and the call's size; a rank whose call differs (a mismatch) writes its
// own slot at its own offset and is caught before anyone reads it. Reuse stays safe: a region
// of a set was last written at an earlier step of that set, which every peer is done with (see
// the top of this file). (Large gathers and all_gathers keep to the start: shm_collectives.cc.)
void Group::next_slot_step(std::size_t bytes, bool walk) {
  next_step();
  slot_step_ = true;
  if (!walk) return;  // at the slots' start (next_step's offset)
  constexpr std::size_t kAlign = 4096;
  const std::size_t stride = (std::max<std::size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  // Up to one page a rank the walk made calls slower, not faster (all_gather of 4 KiB per rank:
  // 0.75 us a call against 0.62 at the slot's start).
  const std::size_t places =
      stride > kAlign && stride < cfg_.slot_bytes ? cfg_.slot_bytes / stride : 1;
  slot_offset_ = static_cast<std::size_t>((step_ >> 1) % places) * stride;
}

// Why data sits as far into a page as its source. glibc's memcpy (2.36, this machine's AMD
// EPYC) copied between the caller's buffer and a slot much more slowly when the two start at
// different places in their pages, as they did whenever the caller's buffer did not start a
// page (malloc puts large buffers 16 bytes in, aligned_alloc(64) 64 bytes in). synk-bench -P,
// 2 ranks, launches alternated (one L3: 52-54 per arm / two L3s: 16-18), MPI/synk medians at
// 0 / 16 / 64 bytes into a page: all_gather of 1 MiB 1.57 / 1.38 / 1.60 and 1.23 / 0.70 / 1.24;
// broadcast of 256 KiB 2.44 / 2.25 / 2.54 and 1.20 / 0.71 / 1.25; of 4 MiB 3.12 / 2.30 / 2.32
// on one L3. The writer places its data at its source's page offset and publishes it in its
// entry (whose data a slot step does not use otherwise); a reader whose buffer sits at the
// same offset, as in most programs running the same code on every rank, then copies between
// equal offsets too. Placed so (launches alternated with the code before, one L3: 68-81 per
// arm / two L3s: 15-28), 16 bytes in: all_gather of 256 KiB-4 MiB 1.24-1.36 -> 1.57-1.61 and
// 0.71-0.89 -> 1.15-1.47; gather 1.87-2.24 -> 2.29-2.65 and 1.06-1.37 -> 2.02-2.36; broadcast
// of 1-4 MiB (16 and 64 bytes in) 2.19-2.31 -> 2.86-3.08 on one L3, of 64-256 KiB 0.70-0.89 ->
// 1.21-1.44 on two. Only where each slot is written by its owner: scatter's root writes the
// others' slots. all_reduce places each rank's slot by its send buffer, and its result area,
// which every rank writes a slice of and reads, where rank 0's destination starts (the root's,
// for reduce), as rank 0 publishes in the second word: one offset for all, the right one when
// every rank's buffers sit alike. all_reduce 16 bytes in, against slots and result area at
// offset 0 (launches alternated, 79-84 per arm on one L3, 45-50 on two): 64 KiB-4 MiB
// 1.53-3.26 -> 1.84-3.55x MPI and 3.34-3.38 -> 3.75-4.28x; at 0 and 64 bytes in synk's times
// stayed within 2%. Left as they were: reduce_at_root and reduce_scatter, which measured the
// same at every offset (their reads feed a reduction, not memcpy).
void Group::shift_slots(const void* own_src, const void* own_dst) {
  shifted_ = true;
  own_shift_ = own_src ? reinterpret_cast<std::uintptr_t>(own_src) % kShiftRoom : 0;
  own_dst_shift_ = own_dst ? reinterpret_cast<std::uintptr_t>(own_dst) % kShiftRoom : 0;
}

std::size_t Group::peer_shift(int peer, int word) const {
  std::uint64_t v = 0;
  std::memcpy(&v, entry_of(blocks_, peer, seq_).data + word * sizeof v, sizeof v);
  return static_cast<std::size_t>(v % kShiftRoom);  // never outside the slot, whatever is there
}

void Group::place_result(int owner) {
  result_shift_ = owner == cfg_.rank ? own_dst_shift_ : peer_shift(owner, 1);
}

bool Group::offer(const void* src, std::size_t bytes) {
  if (stream_) return false;  // shm_group.h says why
  const auto p = reinterpret_cast<std::uintptr_t>(src);
  for (std::size_t i = 0; i < regions_.size(); ++i) {
    const Region& r = regions_[i];
    const auto mine = reinterpret_cast<std::uintptr_t>(r.base) +
                      static_cast<std::uintptr_t>(cfg_.rank) * r.stride;
    if (bytes > 0 && p >= mine && p - mine <= r.bytes && bytes <= r.bytes - (p - mine)) {
      offer_id_ = i + 1;
      offer_off_ = p - mine;
      return true;
    }
  }
  return false;
}

const unsigned char* Group::peer_region(int peer) const {
  if (regions_.empty()) return nullptr;  // regions are made by all ranks: nobody offers
  std::uint64_t v[2];
  std::memcpy(v, entry_of(blocks_, peer, seq_).data + 2 * sizeof v[0], sizeof v);
  if (v[0] == 0) return nullptr;
  if (v[0] > regions_.size() || v[1] > regions_[v[0] - 1].bytes) {
    throw Error(ErrorCode::Backend, std::string(op_name_) + ": rank " + std::to_string(peer) +
                                        " offered node buffer " + std::to_string(v[0] - 1) +
                                        " at " + std::to_string(v[1]) + ", which this rank (" +
                                        std::to_string(cfg_.rank) + ") does not have");
  }
  const Region& r = regions_[v[0] - 1];
  return r.base + static_cast<std::size_t>(peer) * r.stride + v[1];
}

void Group::settle() {
  tiny_ = false;  // the step that follows (CMA's words) is a full one
  wait_peers(back_from(seq_ + 1, 2), seq_ >= call_first_step_ ? call_first_step_ : 0);
}

void Group::post() {
  // What this step streamed into shared memory is visible first. Only copy_in writes there
  // (copy_out writes the caller's buffer, which end() fences): stream_out_ alone needs none.
  if (stream_) stream_fence();
  const std::uint64_t s = seq_ + 1;
  wait_peers(back_from(s, kEagerDepth), 0);  // my entry of that step is rewritten now
  Entry& e = entry_of(blocks_, cfg_.rank, s);
  // Slot steps publish their words (shift_slots always follows next_slot_step); an eager
  // step's data is in its entry already.
  if (slot_step_) {
    const std::uint64_t v[4] = {own_shift_, own_dst_shift_, offer_id_, offer_off_};
    std::memcpy(e.data, v, sizeof v);
  }
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

void Group::sync() {
  post();
  arrive();
}

// A tiny step's data are in the peers' StepCalls, a full eager step's in their entries (a slot
// step's in the slots, found through the entries): the step a rank waits for is the one it reads
// next. Tiny steps against 8 bytes in the entries, 2 ranks, launches alternated (15-17 per arm
// while lines crossed quickly, 3-5 while slowly: the handoff probe), MPI/synk medians: broadcast of
// 8 B 1.12 -> 1.15 and 0.91 -> 1.16; (8 per arm, quick state) all_reduce of 8 B 1.25 -> 1.34,
// reduce 1.24 -> 1.29, all_gather of 8-16 B in all within noise.
const std::atomic<std::uint64_t>& Group::posted_word(int peer) const {
  return tiny_ ? call_of(blocks_, peer, seq_).step : entry_of(blocks_, peer, seq_).step;
}

void Group::arrive() {
  for (int q = 0; q < cfg_.size; ++q) {
    if (q != cfg_.rank) wait_until(q, posted_word(q), seq_, "arrive");
  }
  // A mismatch in this step throws; one in an earlier call waits for end().
  catch_up(seq_, tiny_ ? 0 : seq_);
}

void Group::sync_with(int peer) {
  post();
  if (peer != cfg_.rank) {
    wait_until(peer, posted_word(peer), seq_, "arrive");
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
bool Group::posted(int peer, std::uint64_t t) const {
  return call_of(blocks_, peer, t).step.load(std::memory_order_acquire) >= t;
}

unsigned char* Group::eager_out() {
  return tiny_ ? call_of(blocks_, cfg_.rank, seq_ + 1).data
               : entry_of(blocks_, cfg_.rank, seq_ + 1).data;
}

const unsigned char* Group::eager_in(int peer) const {
  return tiny_ ? call_of(blocks_, peer, seq_).data : entry_of(blocks_, peer, seq_).data;
}

void Group::wait_peers(std::uint64_t done_target, std::uint64_t check_target) {
  check_target = std::max(check_target, done_target);
  if (checked_ < check_target) {
    for (int q = 0; q < cfg_.size; ++q) {
      if (q != cfg_.rank)
        wait_until(q, call_of(blocks_, q, check_target).step, check_target, "arrive");
    }
    catch_up(seq_);  // as far as the peers have posted: checks come in batches
  }
  if (peers_done_ >= done_target) return;
  std::uint64_t least = ~std::uint64_t{0};
  for (int q = 0; q < cfg_.size; ++q) {
    if (q == cfg_.rank) continue;
    const auto& done = block_at(blocks_, q).done;
    if (done.load(std::memory_order_acquire) < done_target)
      wait_until(q, done, done_target, "finish");
    least = std::min(least, done.load(std::memory_order_acquire));
  }
  peers_done_ = least;
}

// Steps this rank did not read are compared by their StepCalls, a line for two steps (and by
// the entries, for the messages, only where they differ); the step it has just read
// (at_hand) by the entries, which are in its cache then. Before, the root of a small
// broadcast (and a non-root of a small reduce) compared its peers' entries of every step, each
// a line the peer had just written. 2 ranks, launches alternated (8 per arm), MPI/synk
// medians by host state (lines crossing fast / slowly, the handoff probe): broadcast of 8 B
// 1.13 -> 1.17 / 0.82 -> 0.93, of 16-64 B 1.16-1.20 -> 1.19-1.24 / 1.08-1.16 -> 1.14-1.18;
// reduce of 8 B 1.21 -> 1.26 / 0.84 -> 0.92, of 16-64 B 1.07-1.21 -> 1.14-1.39; all_reduce and
// all_gather (which compare what they read) within noise.
void Group::catch_up(std::uint64_t limit, std::uint64_t at_hand) {
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

void Group::report(std::uint64_t step, Mismatch&& m) {
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

void Group::publish_done() {
  const std::uint64_t done = std::min(checked_, finished_);
  if (done <= published_done_) return;
  published_done_ = done;
  block_at(blocks_, cfg_.rank).done.store(done, std::memory_order_release);
}

// Every rank compares the same entries, so a mismatch is found alike everywhere: the rank with
// rejected arguments throws its own error, the others a Remote error naming it, or all the
// same "mismatched calls" naming the first differing pair.
bool Group::entries_match(std::uint64_t step, int peer, Mismatch* m) const {
  const Entry& mine = entry_of(blocks_, cfg_.rank, step);
  const auto name = [&] {
    return std::string(detail::to_string(static_cast<detail::Collective>(mine.call.coll)));
  };
  const int lo = peer < 0 ? 0 : peer, hi = peer < 0 ? cfg_.size : peer + 1;
  const std::size_t slot = step % kEagerDepth;
  if (mine.call.error_code >= 0) {
    *m = {static_cast<ErrorCode>(mine.call.error_code), block_at(blocks_, cfg_.rank).errors[slot]};
    return false;
  }
  for (int q = lo; q < hi; ++q) {
    if (entry_of(blocks_, q, step).call.error_code >= 0) {
      *m = {ErrorCode::Remote, name() + ": rank " + std::to_string(q) +
                                   " rejected its arguments: " + block_at(blocks_, q).errors[slot]};
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

void Group::wait_until(int peer, const std::atomic<std::uint64_t>& word, std::uint64_t target,
                       const char* what) {
  for (int i = 0; i < spin_iterations_; ++i) {
    if (word.load(std::memory_order_acquire) >= target) return;
    cpu_relax();
  }
  if (!spin_decided_) decide_spin();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + detail::wait_duration(cfg_.timeout_s);
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
      std::this_thread::sleep_for(kSleepBetweenPolls);
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
      if (!peer_alive(peer) && word.load(std::memory_order_acquire) < target) {
        broken_ = true;
        detail::note_peer_lost();
        throw Error(ErrorCode::Remote,
                    std::string(op_name_) + ": rank " + std::to_string(peer) + " (pid " +
                        std::to_string(block_at(blocks_, peer).pid.load()) + ") died; rank " +
                        std::to_string(cfg_.rank) + " was waiting for it");
      }
    }
    if (warn_pending && now >= warn_at) {
      warn_pending = false;
      SYNK_LOG_AT(warn, op_name_ << ": rank " << cfg_.rank << " has waited "
                                 << detail::seconds_text(cfg_.stall_warn_s)
                                 << " (SYNK_STALL_WARN) for rank " << peer
                                 << ", which has not reached this call; it fails after "
                                 << detail::seconds_text(cfg_.timeout_s) << " (SYNK_TIMEOUT)");
    }
    if (now >= deadline) {
      broken_ = true;
      detail::note_peer_lost();
      throw Error(ErrorCode::Timeout,
                  std::string(op_name_) + ": rank " + std::to_string(cfg_.rank) + " waited " +
                      detail::seconds_text(cfg_.timeout_s) + " (SYNK_TIMEOUT) for rank " +
                      std::to_string(peer) +
                      ", which has not reached this call (" + what + " " +
                      std::to_string(target) + ")");
    }
  }
}

}  // namespace synk::shm
