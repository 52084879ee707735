// The step channel's set-up, the per-rank words, liveness, and the frame of a call (begin,
// end, reject). The steps, checks and waits are in step_sync.cc.
#include "backends/shm/step_channel.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/shm/cpu_share.h"
#include "core/exit_status.h"
#include "core/liveness.h"
#include "core/logging.h"
#include "core/mpi_runtime.h"
#include "synk/error.h"

namespace synk::shm {

using layout::block_at;
using layout::entry_of;
using layout::RankBlock;

namespace {

// Polls before a waiting rank looks at the clock (tens of microseconds). With more
// ranks than CPUs a waiting rank must give its core away almost at once: the rank it waits for
// may need that very core (4 ranks on 2 cores).
constexpr int kSpinIterations = 2000;
constexpr int kSpinIterationsOversubscribed = 16;

}  // namespace

std::size_t StepChannel::control_bytes(int size) {
  return (static_cast<std::size_t>(size) * sizeof(RankBlock) + 4095) / 4096 * 4096;
}

StepChannel::StepChannel(unsigned char* blocks, const GroupConfig& config)
    : cfg_(config), blocks_(blocks) {
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

void StepChannel::decide_spin() {
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

bool StepChannel::polls_before_yielding() {
  if (!spin_decided_) decide_spin();
  return spin_before_yield_.count() > 0;
}

// What a rank that ran ahead has not checked yet is checked here if the peers have posted it
// already (never waits): a mismatch in the last calls still gets said, and fails the process.
StepChannel::~StepChannel() {
  if (!owned_here()) return;  // a forked child's copy: the block is its parent's
  if (!broken_) {
    try {
      catch_up(seq_);
    } catch (const Error& e) {
      report_at_close(e.what());
    }
  }
  if (deferred_) report_at_close(deferred_error_.message.c_str());
  close();
}

void StepChannel::report_at_close(const char* what) {
  std::fprintf(stderr,
               "synk: rank %s: %s (found when the group closed: the process's exit status will "
               "be 1)\n",
               cfg_.rank_text(cfg_.rank).c_str(), what);
  detail::fail_exit_status();
}

bool StepChannel::owned_here() const {
  return block_at(blocks_, cfg_.rank).pid.load(std::memory_order_relaxed) == getpid();
}

void StepChannel::close() {
  if (!owned_here()) return;
  // Nothing here is read by this rank any more: every step it posted is done with.
  RankBlock& mine = block_at(blocks_, cfg_.rank);
  if (seq_ > published_done_) mine.done.store(seq_, std::memory_order_release);
  published_done_ = std::max(published_done_, seq_);
  mine.closed.store(broken_ ? layout::kClosedAfterFailure : layout::kClosed,
                    std::memory_order_release);
}

void StepChannel::begin_call(detail::Collective c, std::size_t count, DataType t, ReduceOp op,
                             int root, const char* name) {
  op_name_ = name != nullptr ? name : detail::to_string(c);
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
}

void StepChannel::end_call() {
  finished_ = seq_;  // every read of this call is done
  publish_done();
  if (!deferred_) return;
  deferred_ = false;
  throw Error(deferred_error_.code,
              deferred_error_.message + " (reported by this rank's next call, " + op_name_ +
                  ", which completed: the root of a broadcast or a small scatter and the "
                  "non-roots of a small reduce or gather do not wait for the others)");
}

// The rejection travels in this rank's entry: every rank that compares it throws, the others
// a Remote error naming this rank, this rank its own (from sync()'s check).
void StepChannel::reject(detail::Collective c, ErrorCode code, const std::string& message,
                         const char* name) {
  begin_call(c, 0, DataType::uint8, ReduceOp::sum, 0, name);
  call_.error_code = static_cast<std::int8_t>(code);
  next_step();
  char* text = block_at(blocks_, cfg_.rank).errors[(seq_ + 1) % kEagerDepth];
  std::snprintf(text, layout::kErrorText, "%s", message.c_str());
  sync();  // throws
  throw Error(code, message);
}

bool StepChannel::peer_alive(int peer) const {
  const RankBlock& b = block_at(blocks_, peer);
  const auto pid = static_cast<pid_t>(b.pid.load(std::memory_order_acquire));
  if (pid <= 0) return true;  // not started yet: only the deadline can tell
  // In another PID namespace its pid is not its pid here (a rank in a container of its own,
  // sharing this node's memory, was taken for dead). Only the deadline can tell there either.
  // Decided once, when first needed.
  auto& watch = watched_[static_cast<std::size_t>(peer)];
  if (watch == Watch::unknown) {
    const std::uint64_t theirs = b.pid_namespace.load(std::memory_order_relaxed);
    watch = detail::pid_watchable(pid, theirs, pid_namespace_) ? Watch::yes : Watch::no;
  }
  if (watch == Watch::no) return true;
  return detail::process_alive(pid);
}

void StepChannel::mark_broken() {
  broken_ = true;
  detail::note_peer_lost();
}

std::uint64_t StepChannel::peer_step_word(int peer, int word) const {
  std::uint64_t v = 0;
  std::memcpy(&v, entry_of(blocks_, peer, seq_).data + word * sizeof v, sizeof v);
  return v;
}

std::size_t StepChannel::peer_call_count(int peer) const {
  return entry_of(blocks_, peer, call_first_step_).call.count;
}

void StepChannel::set_status(std::int64_t v) {
  block_at(blocks_, cfg_.rank).status.store(v, std::memory_order_relaxed);  // published by sync
}

std::int64_t StepChannel::status_of(int peer) const {
  return block_at(blocks_, peer).status.load(std::memory_order_relaxed);
}

pid_t StepChannel::peer_pid(int peer) const {
  return static_cast<pid_t>(block_at(blocks_, peer).pid.load(std::memory_order_relaxed));
}

std::string StepChannel::describe_call(int peer, std::uint64_t step) const {
  const Call& c = entry_of(blocks_, peer, step).call;
  return detail::describe_call(static_cast<detail::Collective>(c.coll), c.count,
                               static_cast<DataType>(c.dtype), static_cast<ReduceOp>(c.op), c.root);
}

}  // namespace synk::shm
