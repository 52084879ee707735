// shm::Group set-up and synchronization. The collectives themselves are in shm_collectives.cc.
//
// Why one sync per step is enough: step s writes the slot set s % 2. A rank writes set s % 2
// again only at step s + 2, after it has passed the last sync of step s + 1, which every rank
// reaches only after it finished reading what step s left in the set.
#include "backends/shm/shm_group.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "core/backoff.h"
#include "core/liveness.h"
#include "synk/error.h"

namespace synk::shm {

namespace {

constexpr std::size_t kLine = 128;  // two cache lines: no false sharing with the prefetcher
constexpr std::size_t kHeaderBytes = 4096;
// Spin this long before yielding. With more ranks than cores a waiting rank must give its core
// away almost at once: the rank it waits for may need that very core (4 ranks on 2 cores).
constexpr int kSpinIterations = 2000;
constexpr int kSpinIterationsOversubscribed = 16;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

// A call's descriptor, compact so that both parities sit in the cache line of the arrival
// counter: a waiting rank's one miss on a peer's line brings its arrival and its call both.
struct Group::Call {
  std::uint64_t count;
  std::uint64_t number;
  std::int32_t root;
  std::int8_t coll;
  std::int8_t dtype;
  std::int8_t op;
  std::int8_t error_code;  // -1, or the ErrorCode of this rank's rejected arguments
};
static_assert(sizeof(Group::Call) == 24);

// One rank's control block. Each group of fields has its own line; only the owner writes.
struct alignas(kLine) RankBlock {
  alignas(kLine) std::atomic<std::uint64_t> arrived;
  Group::Call calls[2];                             // by call-number parity
  alignas(kLine) std::atomic<std::int64_t> pid;
  alignas(kLine) std::atomic<std::int64_t> status;  // gatherv: the root's verdict on the counts
  // This call's send buffer in the owner's address space, for cross-memory attach (shm_cma.cc),
  // and the owner's verdict on it (the probe, then each call's copy result).
  alignas(kLine) std::atomic<std::uint64_t> send_addr;
  std::atomic<std::int64_t> cma_status;
  alignas(kLine) char errors[2][240];  // the text of a rejected call, by call-number parity
};
static_assert(offsetof(RankBlock, calls) + sizeof(RankBlock::calls) <= 64,
              "the arrival counter and the call descriptors share one cache line");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "cross-process atomics need lock-free 64-bit atomics");

namespace {
RankBlock& block_at(unsigned char* blocks, int r) {
  return reinterpret_cast<RankBlock*>(blocks)[r];
}
}  // namespace

std::size_t Group::segment_bytes(int size, std::size_t slot_bytes) {
  const std::size_t n = static_cast<std::size_t>(size);
  std::size_t control = (n * sizeof(RankBlock) + 4095) / 4096 * 4096;
  // Two sets of (one slot per rank + one shared result area).
  return kHeaderBytes + control + 2 * (n + 1) * slot_bytes;
}

Group::Group(void* base, const GroupConfig& config) : cfg_(config) {
  base_ = static_cast<unsigned char*>(base);
  blocks_ = base_ + kHeaderBytes;
  const std::size_t n = static_cast<std::size_t>(cfg_.size);
  data_ = blocks_ + (n * sizeof(RankBlock) + 4095) / 4096 * 4096;
  block_at(blocks_, cfg_.rank).pid.store(getpid(), std::memory_order_release);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  spin_iterations_ = cpus > 0 && cpus < cfg_.size ? kSpinIterationsOversubscribed : kSpinIterations;
}

unsigned char* Group::slot(int peer) const {
  const std::size_t set = step_ & 1;
  const std::size_t n = static_cast<std::size_t>(cfg_.size);
  return data_ + (set * (n + 1) + static_cast<std::size_t>(peer)) * cfg_.slot_bytes;
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

Group::~Group() {
  if (deferred_) std::fprintf(stderr, "synk: rank %d: %s (found by this rank's last call)\n",
                              cfg_.rank, deferred_error_.message.c_str());
  if (!check_pending_ || broken_) return;
  for (int q = 0; q < cfg_.size; ++q) {
    if (block_at(blocks_, q).arrived.load(std::memory_order_acquire) < seq_) return;
  }
  Mismatch m;
  if (!calls_match(-1, &m)) {
    std::fprintf(stderr, "synk: rank %d: %s (found when the group closed: it was this rank's last call)\n",
                 cfg_.rank, m.message.c_str());
  }
}

void Group::begin(detail::Collective c, std::size_t count, DataType t, ReduceOp op, int root) {
  op_name_ = detail::to_string(c);
  // Fields a collective does not use are normalized, so only real differences are mismatches.
  if (!detail::uses_op(c)) op = ReduceOp::sum;
  if (!detail::has_root(c)) root = 0;
  if (broken_) {
    throw Error(ErrorCode::InvalidUsage,
                std::string(op_name_) + ": the shared-memory group failed earlier (a rank died "
                "or timed out); create a new communicator");
  }
  settle(true);  // the previous call's check, if it is still due; its failure waits for end()
  Call& mine = block_at(blocks_, cfg_.rank).calls[calls_ & 1];
  mine.coll = static_cast<std::int8_t>(c);
  mine.dtype = static_cast<std::int8_t>(t);
  mine.op = static_cast<std::int8_t>(op);
  mine.root = root;
  mine.count = count;
  mine.number = calls_;
  mine.error_code = -1;
  ++calls_;
  check_pending_ = true;  // published by the release store of the first sync
  check_from_ = seq_ + 1;
  check_name_ = op_name_;
}

void Group::end() {
  if (!deferred_) return;
  deferred_ = false;
  throw Error(deferred_error_.code,
              deferred_error_.message + " (reported by this rank's next call, " + op_name_ +
                  ", which completed: the root of a broadcast and the non-roots of a small reduce "
                  "do not wait for the others)");
}

void Group::next_step() {
  settle(false);
  ++step_;
}

void Group::settle(bool defer) {
  if (known_ < seq_) {
    for (int q = 0; q < cfg_.size; ++q) {
      if (q != cfg_.rank) wait_for(q, seq_);
    }
    known_ = seq_;
  }
  if (!check_pending_ || known_ < check_from_) return;
  check_pending_ = false;
  Mismatch m;
  if (calls_match(-1, &m)) return;
  if (!defer) throw Error(m.code, m.message);
  deferred_ = true;
  deferred_error_ = std::move(m);
}

void Group::post() {
  ++seq_;
  block_at(blocks_, cfg_.rank).arrived.store(seq_, std::memory_order_release);
}

void Group::sync_with(int peer) {
  ++seq_;
  block_at(blocks_, cfg_.rank).arrived.store(seq_, std::memory_order_release);
  if (peer != cfg_.rank) wait_for(peer, seq_);
  if (cfg_.size <= 2) known_ = seq_;  // `peer` is everybody else
  if (check_pending_ && seq_ >= check_from_) {
    // What `peer` wrote is read only if its call is this one; the others' calls are checked
    // by this rank's next settle (at two ranks, there is nobody else).
    if (cfg_.size <= 2) check_pending_ = false;
    Mismatch m;
    if (!calls_match(peer, &m)) {
      check_pending_ = false;  // reported here, once
      throw Error(m.code, m.message);
    }
  }
}

void Group::sync() {
  ++seq_;
  block_at(blocks_, cfg_.rank).arrived.store(seq_, std::memory_order_release);
  for (int q = 0; q < cfg_.size; ++q) {
    if (q != cfg_.rank) wait_for(q, seq_);
  }
  known_ = seq_;
  if (check_pending_) {
    check_pending_ = false;
    check_calls();
  }
}

bool Group::peer_alive(int peer) const {
  const auto pid = static_cast<pid_t>(block_at(blocks_, peer).pid.load(std::memory_order_acquire));
  if (pid <= 0) return true;  // not started yet: only the deadline can tell
  return detail::process_alive(pid);
}

std::size_t Group::peer_call_count(int peer) const {
  return block_at(blocks_, peer).calls[(calls_ - 1) & 1].count;
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

std::string Group::describe_call(int peer) const {
  const Call& c = block_at(blocks_, peer).calls[(calls_ - 1) & 1];
  return detail::describe_call(static_cast<detail::Collective>(c.coll), c.count,
                               static_cast<DataType>(c.dtype), static_cast<ReduceOp>(c.op), c.root);
}

// Every rank sees the same descriptors, so a mismatch throws on every rank at the same point
// and the group stays usable.
void Group::reject(detail::Collective c, ErrorCode code, const std::string& message) {
  begin(c, 0, DataType::uint8, ReduceOp::sum, 0);
  RankBlock& b = block_at(blocks_, cfg_.rank);
  b.calls[(calls_ - 1) & 1].error_code = static_cast<std::int8_t>(code);
  std::snprintf(b.errors[(calls_ - 1) & 1], sizeof b.errors[0], "%s", message.c_str());
  next_step();
  sync();  // check_calls throws
  throw Error(code, message);
}

void Group::check_calls(int peer) {
  Mismatch m;
  if (!calls_match(peer, &m)) throw Error(m.code, m.message);
}

bool Group::calls_match(int peer, Mismatch* m) const {
  const std::size_t parity = (calls_ - 1) & 1;
  const Call& mine = block_at(blocks_, cfg_.rank).calls[parity];
  const int lo = peer < 0 ? 0 : peer, hi = peer < 0 ? cfg_.size : peer + 1;
  if (mine.error_code >= 0) {
    *m = {static_cast<ErrorCode>(mine.error_code), block_at(blocks_, cfg_.rank).errors[parity]};
    return false;
  }
  for (int q = lo; q < hi; ++q) {
    const Call& other = block_at(blocks_, q).calls[parity];
    if (other.error_code >= 0) {
      *m = {ErrorCode::Remote, std::string(check_name_) + ": rank " + std::to_string(q) +
                                   " rejected its arguments: " + block_at(blocks_, q).errors[parity]};
      return false;
    }
  }
  for (int q = lo; q < hi; ++q) {
    const Call& other = block_at(blocks_, q).calls[parity];
    const bool counts_differ =
        other.count != mine.count && mine.coll != static_cast<int>(detail::Collective::gatherv);
    if (other.coll != mine.coll || other.dtype != mine.dtype || other.op != mine.op ||
        other.root != mine.root || counts_differ || other.number != mine.number) {
      const int first = std::min(q, cfg_.rank), second = std::max(q, cfg_.rank);
      *m = {ErrorCode::InvalidUsage,
            std::string(check_name_) + ": mismatched calls: rank " + std::to_string(first) +
                " called " + describe_call(first) + ", rank " + std::to_string(second) +
                " called " + describe_call(second)};
      return false;
    }
  }
  return true;
}

void Group::wait_for(int peer, std::uint64_t target) {
  const std::atomic<std::uint64_t>& a = block_at(blocks_, peer).arrived;
  for (int i = 0; i < spin_iterations_; ++i) {
    if (a.load(std::memory_order_acquire) >= target) return;
    cpu_relax();
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + detail::wait_duration(cfg_.timeout_s);
  auto next_liveness_check = start + std::chrono::milliseconds(10);
  for (std::uint32_t i = 1;; ++i) {
    sched_yield();
    if (a.load(std::memory_order_acquire) >= target) return;
    if ((i & 31) != 0) continue;
    const auto now = Clock::now();
    if (now >= next_liveness_check) {
      next_liveness_check = now + std::chrono::milliseconds(10);
      if (!peer_alive(peer) && a.load(std::memory_order_acquire) < target) {
        broken_ = true;
        throw Error(ErrorCode::Remote,
                    std::string(op_name_) + ": rank " + std::to_string(peer) + " (pid " +
                        std::to_string(block_at(blocks_, peer).pid.load()) + ") died; rank " +
                        std::to_string(cfg_.rank) + " was waiting for it");
      }
    }
    if (now >= deadline) {
      broken_ = true;
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f", cfg_.timeout_s);
      throw Error(ErrorCode::Timeout,
                  std::string(op_name_) + ": rank " + std::to_string(cfg_.rank) + " waited " +
                      secs + " s (SYNK_TIMEOUT) for rank " + std::to_string(peer) +
                      ", which has not reached this call (sync " + std::to_string(target) + ")");
    }
  }
}

}  // namespace synk::shm
