// The CMA pull: the probe, the opening and closing steps of a single-copy call, and the copies.
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "backends/shm/cma_pull.h"
#include "core/logging.h"
#include "core/mpi_runtime.h"
#include "synk/error.h"

namespace synk::shm {

namespace {

constexpr std::uint64_t kProbeMagic = 0x73796e6b636d6100ULL;  // "synkcma\0"

// process_vm_readv may move fewer bytes than asked (a partly unmapped range, or the kernel's own
// limits); loop until done. Returns 0 or the errno of the failure.
int cma_pull_bytes(pid_t pid, void* local, std::uint64_t remote, std::size_t bytes) {
  while (bytes > 0) {
    iovec l{local, bytes};
    iovec r{reinterpret_cast<void*>(static_cast<std::uintptr_t>(remote)), bytes};
    const ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;
    local = static_cast<unsigned char*>(local) + n;
    remote += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

CmaPull::CmaPull(StepChannel& steps, std::size_t min_bytes)
    : steps_(steps), min_bytes_(min_bytes) {}

bool CmaPull::usable(std::size_t bytes) {
  if (!may_be_on() || bytes < min_bytes_) return false;
  if (state_ == State::unknown) probe();
  return state_ == State::on;
}

bool CmaPull::may_be_on() const {
  return min_bytes_ != 0 && steps_.size() >= 2 && state_ != State::off;
}

void CmaPull::publish(const void* mine, const void* second) {
  // Published by the release store of the next post.
  layout::RankBlock& b = steps_.block(steps_.rank());
  b.send_addr.store(reinterpret_cast<std::uintptr_t>(mine), std::memory_order_relaxed);
  b.recv_addr.store(reinterpret_cast<std::uintptr_t>(second), std::memory_order_relaxed);
}

std::uint64_t CmaPull::peer_buffer(int peer, int which) const {
  const layout::RankBlock& b = steps_.block(peer);
  return (which == 0 ? b.send_addr : b.recv_addr).load(std::memory_order_relaxed);
}

void CmaPull::set_status(std::int64_t v) {
  steps_.block(steps_.rank()).cma_status.store(v, std::memory_order_relaxed);
}

std::int64_t CmaPull::status_of(int peer) const {
  return steps_.block(peer).cma_status.load(std::memory_order_relaxed);
}

// Two syncs: everyone publishes a word of its own memory; everyone reads every peer's word
// and posts the verdict; CMA is on only if every rank could read every peer.
void CmaPull::probe() {
  steps_.settle();  // the published words below are rewritten: every peer must be done with them
  probe_word_ = kProbeMagic + static_cast<std::uint64_t>(steps_.rank());
  publish(&probe_word_, nullptr);
  steps_.sync();
  int failure = 0, failed_peer = -1;
  for (int q = 0; q < steps_.size() && failure == 0; ++q) {
    if (q == steps_.rank()) continue;
    std::uint64_t word = 0;
    failure = cma_pull_bytes(steps_.peer_pid(q), &word, peer_buffer(q), sizeof word);
    if (failure == 0 && word != kProbeMagic + static_cast<std::uint64_t>(q)) failure = EIO;
    if (failure != 0) failed_peer = q;
  }
  set_status(failure);
  steps_.sync();
  state_ = State::on;
  for (int q = 0; q < steps_.size(); ++q) {
    if (status_of(q) != 0) state_ = State::off;
  }
  if (failure != 0) {
    SYNK_LOG_AT(info, "shm: rank " << steps_.rank() << " cannot read rank " << failed_peer
                                   << "'s memory (process_vm_readv: " << std::strerror(failure)
                                   << "); large copies go through the shared slots");
  } else if (steps_.rank() == 0) {
    SYNK_LOG_AT(info, "shm: cross-memory attach " << (state_ == State::on ? "on" : "off")
                                                  << " for copies of at least "
                                                  << min_bytes_ << " bytes");
  }
}

unsigned char* CmaPull::scratch(std::size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void CmaPull::open(const void* mine, const void* second) {
  steps_.settle();  // the published addresses are rewritten: every peer must be done with them
  publish(mine, second);
  steps_.sync();
}

void CmaPull::pull(int peer, void* local, std::uint64_t remote, std::size_t bytes) {
  if (bytes == 0 || errno_ != 0) return;
  errno_ = cma_pull_bytes(steps_.peer_pid(peer), local, remote, bytes);
  if (errno_ != 0) failed_peer_ = peer;
}

// A failed copy still takes part in the closing sync, so every rank leaves the call together
// and throws the same error; a peer that died is found by the sync's liveness check.
void CmaPull::finish() {
  const int failure = errno_, peer = failed_peer_;
  errno_ = 0;
  failed_peer_ = -1;
  set_status(failure == 0 ? 0 : (static_cast<std::int64_t>(peer) << 32) | failure);
  steps_.sync();
  for (int q = 0; q < steps_.size(); ++q) {
    const std::int64_t s = status_of(q);
    if (s == 0) continue;
    const int err = static_cast<int>(s & 0xffffffff), other = static_cast<int>(s >> 32);
    if (err == ESRCH) {
      // The peer died after it posted this sync (a root waiting for its pullers, killed):
      // the same error every other rank's liveness check gives, naming the dead rank.
      steps_.mark_broken();
      throw Error(ErrorCode::Remote, std::string(steps_.op_name()) + ": rank " +
                                         steps_.rank_text(other) + " (pid " +
                                         std::to_string(steps_.peer_pid(other)) + ") died; rank " +
                                         steps_.rank_text(q) +
                                         " could not copy from it (process_vm_readv: " +
                                         std::strerror(err) + ")");
    }
    const std::string what = std::string(steps_.op_name()) + ": rank " +
                             steps_.rank_text(q) + " could not copy from/to rank " +
                             steps_.rank_text(other) + ": " + std::strerror(err);
    throw Error(q == steps_.rank() ? ErrorCode::System : ErrorCode::Remote, what);
  }
}

}  // namespace synk::shm
