// shm::Group set-up, the per-rank words, and the frame of a call (begin, end, reject). The
// steps, checks and waits are in shm_sync.cc; the collectives in shm_collectives.cc.
#include "backends/shm/shm_group.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backends/shm/byte_offset.h"
#include "backends/shm/cpu_share.h"
#include "backends/shm/shm_layout.h"
#include "backends/shm/stream_copy.h"
#include "backends/shm/vector_copy.h"
#include "core/liveness.h"
#include "core/logging.h"
#include "synk/error.h"

namespace synk::shm {

using layout::block_at;
using layout::entry_of;
using layout::RankBlock;

namespace {

// Polls before a waiting rank looks at the clock (2000 pauses: about 50 us here). With more
// ranks than CPUs a waiting rank must give its core away almost at once: the rank it waits for
// may need that very core (4 ranks on 2 cores).
constexpr int kSpinIterations = 2000;
constexpr int kSpinIterationsOversubscribed = 16;

std::size_t control_bytes(int size) {
  return (static_cast<std::size_t>(size) * sizeof(RankBlock) + 4095) / 4096 * 4096;
}

}  // namespace

std::size_t Group::segment_bytes(int size, std::size_t slot_bytes) {
  const std::size_t n = static_cast<std::size_t>(size);
  // Two sets of (one slot per rank + one shared result area).
  return layout::kHeaderBytes + control_bytes(size) + 2 * (n + 1) * slot_stride(slot_bytes);
}

Group::Group(void* base, const GroupConfig& config)
    : cfg_(config), store_tuner_(config.store_mode), algo_chooser_(config.forced_algos) {
  base_ = static_cast<unsigned char*>(base);
  blocks_ = base_ + layout::kHeaderBytes;
  data_ = blocks_ + control_bytes(cfg_.size);
  // Map every control block and slot now, writable: otherwise the first pass through the
  // entries takes a page fault per page and rank, which shows in the first small calls (2-4 us
  // each instead of 0.2), and so does the first walk of the slots (next_slot_step), a fault
  // per 4 KiB and rank (synk-bench's first small all_gather rows took 5.5 us a call instead
  // of 0.6 until every place had been used once). Best effort: before Linux 5.14 the faults
  // simply come later.
  madvise(blocks_, segment_bytes(cfg_.size, cfg_.slot_bytes) - layout::kHeaderBytes,
          MADV_POPULATE_WRITE);
  RankBlock& mine = block_at(blocks_, cfg_.rank);
  pid_namespace_ = detail::pid_namespace_id();
  watched_.assign(static_cast<std::size_t>(cfg_.size), Watch::unknown);
  mine.pid_namespace.store(pid_namespace_, std::memory_order_relaxed);
  mine.pid.store(getpid(), std::memory_order_release);
  const bool known = sched_getaffinity(0, sizeof mine.cpus, &mine.cpus) == 0;
  mine.cpus_known.store(known ? 1 : 2, std::memory_order_release);
  const double quota = cgroup_cpu_limit();
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const int ranks = std::max(cfg_.size, cfg_.machine_ranks);
  const bool fewer = (cpus > 0 && cpus < ranks) || (quota > 0 && quota < ranks);
  spin_iterations_ = fewer ? kSpinIterationsOversubscribed : kSpinIterations;
  spin_decided_ = fewer;  // nothing the peers' masks say can give the ranks more CPUs
  if (fewer && cfg_.rank == 0) {
    SYNK_LOG_AT(info, "shm: " << ranks << " ranks on this machine, " << cpus
                              << " CPUs online, cgroup CPU limit "
                              << quota << " (0: none)"
                              << ": a waiting rank yields its core after a few polls");
  }
}

void Group::decide_spin() {
  std::vector<cpu_set_t> masks(static_cast<std::size_t>(cfg_.size));
  for (int q = 0; q < cfg_.size; ++q) {
    const RankBlock& b = block_at(blocks_, q);
    const std::uint32_t known = b.cpus_known.load(std::memory_order_acquire);
    if (known == 0) return;  // not yet published: decide at a later wait
    if (known != 1) {        // unknown: assume the worst
      spin_iterations_ = kSpinIterationsOversubscribed;
      spin_decided_ = true;
      if (cfg_.rank == 0) {
        SYNK_LOG_AT(info, "shm: rank " << q << "'s CPUs are unknown (sched_getaffinity failed):"
                                          " a waiting rank yields its core after a few polls");
      }
      return;
    }
    masks[static_cast<std::size_t>(q)] = b.cpus;
  }
  spin_decided_ = true;
  const bool own_cpus = each_rank_has_a_cpu(masks);
  if (own_cpus) {
    spin_before_yield_ = std::chrono::microseconds(cfg_.spin_us);
  } else {
    spin_iterations_ = kSpinIterationsOversubscribed;
  }
  if (cfg_.rank != 0) return;
  if (own_cpus) {
    SYNK_LOG_AT(info, "shm: every rank has a CPU of its own: a waiting rank polls for up to "
                          << cfg_.spin_us << " us before it yields its core (SYNK_SHM_SPIN_US)");
  } else {
    SYNK_LOG_AT(info, "shm: ranks share CPUs (affinity masks): a waiting rank yields its core "
                      "after a few polls");
  }
}

bool Group::polls_before_yielding() {
  if (!spin_decided_) decide_spin();
  return spin_before_yield_.count() > 0;
}

// What a rank that ran ahead has not checked yet is checked here if the peers have posted it
// already (never waits): a mismatch in the last calls still gets said.
Group::~Group() {
  if (!broken_) {
    try {
      catch_up(seq_);
    } catch (const Error& e) {
      std::fprintf(stderr, "synk: rank %d: %s (found when the group closed)\n", cfg_.rank, e.what());
    }
  }
  if (deferred_) {
    std::fprintf(stderr, "synk: rank %d: %s (found when the group closed)\n", cfg_.rank,
                 deferred_error_.message.c_str());
  }
}

int Group::add_region(unsigned char* base, std::size_t stride, std::size_t bytes,
                      std::shared_ptr<void> keep) {
  regions_.push_back({base, stride, bytes, std::move(keep)});
  return static_cast<int>(regions_.size()) - 1;
}

unsigned char* Group::slot(int peer) const {
  const std::size_t set = step_ & 1;
  const std::size_t n = static_cast<std::size_t>(cfg_.size);
  std::size_t shift = 0;
  if (peer == cfg_.size) {
    shift = result_shift_;
  } else if (shifted_) {
    shift = peer == cfg_.rank ? own_shift_ : peer_shift(peer);
  }
  return data_ + (set * (n + 1) + static_cast<std::size_t>(peer)) * slot_stride(cfg_.slot_bytes) +
         slot_offset_ + shift;
}

unsigned char* Group::result() const { return slot(cfg_.size); }

void Group::slice(int peer, std::size_t count, std::size_t es, std::size_t* lo,
                  std::size_t* hi) const {
  const std::size_t unit = 64 / es;
  const std::size_t units = (count + unit - 1) / unit;
  const std::size_t n = static_cast<std::size_t>(cfg_.size);
  const std::size_t p = static_cast<std::size_t>(peer);
  *lo = std::min(count, units * p / n * unit);
  *hi = std::min(count, units * (p + 1) / n * unit);
}

void Group::begin(detail::Collective c, std::size_t count, DataType t, ReduceOp op, int root) {
  op_name_ = detail::to_string(c);
  if (!spin_decided_) decide_spin();  // as soon as every peer's CPUs are out
  // Fields a collective does not use are normalized, so only real differences are mismatches.
  if (!detail::uses_op(c)) op = ReduceOp::sum;
  if (!detail::has_root(c)) root = 0;
  if (broken_) {
    throw Error(ErrorCode::InvalidUsage,
                std::string(op_name_) + ": the shared-memory group failed earlier (a rank died "
                "or timed out); create a new communicator");
  }
  call_.coll = static_cast<std::int8_t>(c);
  call_.dtype = static_cast<std::int8_t>(t);
  call_.op = static_cast<std::int8_t>(op);
  call_.root = root;
  call_.count = count;
  call_.number = calls_;
  call_.error_code = -1;
  ++calls_;
  call_first_step_ = seq_ + 1;
  algo_chosen_ = false;  // a call that threw before its end() leaves nothing to time
  const std::size_t bytes = count * size_of(t);
  stream_ = store_tuner_.choose(static_cast<int>(c), bytes);
  const bool gathers = c == detail::Collective::all_gather || c == detail::Collective::gather;
  stream_out_ =
      store_tuner_.stream_out(gathers ? bytes * static_cast<std::size_t>(cfg_.size) : bytes);
  if (store_tuner_.timing()) call_start_ = std::chrono::steady_clock::now();
}

namespace {

// Streaming as the call chose, else vector_copy (vector_copy.h says why not memcpy).
void copy_with(bool streaming, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (streaming) {
    stream_copy(dst, src, bytes);
  } else {
    vector_copy(dst, src, bytes);
  }
}

}  // namespace

void Group::copy_in(void* dst, const void* src, std::size_t bytes) const {
  copy_with(stream_, dst, src, bytes);
}

void Group::copy_out(void* dst, const void* src, std::size_t bytes) const {
  copy_with(stream_out_, dst, src, bytes);
}

void Group::copy_in_and_out(void* slot, void* own, const void* src, std::size_t bytes) const {
  constexpr std::size_t kPiece = 8 * 1024;  // well inside L1
  for (std::size_t o = 0; o < bytes; o += kPiece) {
    const std::size_t n = std::min(kPiece, bytes - o);
    copy_in(at(slot, o), cat(src, o), n);
    copy_out(at(own, o), cat(src, o), n);
  }
}

void Group::end() {
  // The caller may hand recv to another thread next: what was streamed into it is visible first.
  if (stream_ || stream_out_) stream_fence();
  if (store_tuner_.timing()) {
    store_tuner_.record(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - call_start_).count());
  }
  if (algo_chosen_) time_algo_trial();
  finished_ = seq_;  // every read of this call is done
  publish_done();
  if (!deferred_) return;
  deferred_ = false;
  throw Error(deferred_error_.code,
              deferred_error_.message + " (reported by this rank's next call, " + op_name_ +
                  ", which completed: the root of a broadcast or a small scatter and the "
                  "non-roots of a small reduce or gather do not wait for the others)");
}

bool Group::peer_alive(int peer) const {
  const RankBlock& b = block_at(blocks_, peer);
  const auto pid = static_cast<pid_t>(b.pid.load(std::memory_order_acquire));
  if (pid <= 0) return true;  // not started yet: only the deadline can tell
  // In another PID namespace its pid is not its pid here (a rank in a container of its own,
  // sharing this node's memory: "rank 0 (pid 17381) died" came after a 10 ms wait for a live
  // rank). Only the deadline can tell there either. Decided once, when first needed.
  auto& watch = watched_[static_cast<std::size_t>(peer)];
  if (watch == Watch::unknown) {
    const std::uint64_t theirs = b.pid_namespace.load(std::memory_order_relaxed);
    watch = detail::pid_watchable(pid, theirs, pid_namespace_) ? Watch::yes : Watch::no;
  }
  if (watch == Watch::no) return true;
  return detail::process_alive(pid);
}

std::size_t Group::peer_call_count(int peer) const {
  return entry_of(blocks_, peer, call_first_step_).call.count;
}

void Group::set_status(std::int64_t v) {
  block_at(blocks_, cfg_.rank).status.store(v, std::memory_order_relaxed);  // published by sync
}

std::int64_t Group::status_of(int peer) const {
  return block_at(blocks_, peer).status.load(std::memory_order_relaxed);
}

void Group::publish(const void* send) {
  RankBlock& b = block_at(blocks_, cfg_.rank);  // published by the release store of the sync
  b.send_addr.store(reinterpret_cast<std::uintptr_t>(send), std::memory_order_relaxed);
}

std::uint64_t Group::peer_send(int peer) const {
  return block_at(blocks_, peer).send_addr.load(std::memory_order_relaxed);
}

void Group::set_cma_status(std::int64_t v) {
  block_at(blocks_, cfg_.rank).cma_status.store(v, std::memory_order_relaxed);
}

pid_t Group::peer_pid(int peer) const {
  return static_cast<pid_t>(block_at(blocks_, peer).pid.load(std::memory_order_relaxed));
}

std::int64_t Group::cma_status_of(int peer) const {
  return block_at(blocks_, peer).cma_status.load(std::memory_order_relaxed);
}

std::string Group::describe_call(int peer, std::uint64_t step) const {
  const Call& c = entry_of(blocks_, peer, step).call;
  return detail::describe_call(static_cast<detail::Collective>(c.coll), c.count,
                               static_cast<DataType>(c.dtype), static_cast<ReduceOp>(c.op), c.root);
}

// The rejection travels in this rank's entry: every rank that compares it throws, the others
// a Remote error naming this rank, this rank its own (from sync()'s check).
void Group::reject(detail::Collective c, ErrorCode code, const std::string& message) {
  begin(c, 0, DataType::uint8, ReduceOp::sum, 0);
  call_.error_code = static_cast<std::int8_t>(code);
  next_step();
  char* text = block_at(blocks_, cfg_.rank).errors[(seq_ + 1) % kEagerDepth];
  std::snprintf(text, layout::kErrorText, "%s", message.c_str());
  sync();  // throws
  throw Error(code, message);
}

}  // namespace synk::shm
