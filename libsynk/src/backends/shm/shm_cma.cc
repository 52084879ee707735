// Large scatters by cross-memory attach: each rank pulls its block straight out of the root's
// send buffer with process_vm_readv, all at once, while the root copies its own. Through the
// slots the root alone would copy every block in, one step after another.
//
// Only scatter: on this machine's measurements (synk-bench, 2 ranks) the kernel's copy, which
// pins and maps the other process's pages 4 KiB at a time, is slower than two memcpys through the
// slots (broadcast 4.4 ms against 7.1 ms at 64 MiB, all_gather 7.7 against 9.8), and gains only
// where the slot path leaves ranks idle: scatter from 2 MiB per rank (1.26-1.47x MPI against
// 0.52-0.99x through the slots).
//
// A call is: publish the send buffer's address, sync (which also checks the calls), copy, sync. The
// closing sync keeps the root's buffer alive and unchanged until the last pull is done.
//
// The kernel allows these calls only where ptrace would be allowed (same user; Yama's
// ptrace_scope; seccomp in some containers), so the first eligible call probes every pair of
// ranks, and the group keeps to the slot path if any pair fails. SYNK_SHM_CMA_BYTES=0 turns
// it off.
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "backends/shm/byte_offset.h"
#include "backends/shm/shm_group.h"
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

bool Group::use_cma(std::size_t bytes) {
  if (cfg_.cma_min_bytes == 0 || bytes < cfg_.cma_min_bytes || cfg_.size < 2) return false;
  if (cma_ == Cma::unknown) probe_cma();
  return cma_ == Cma::on;
}

// Two syncs: everyone publishes a word of its own memory; everyone reads every peer's word
// and posts the verdict; CMA is on only if every rank could read every peer.
void Group::probe_cma() {
  settle();  // the published words below are rewritten: every peer must be done with them
  cma_probe_word_ = kProbeMagic + static_cast<std::uint64_t>(cfg_.rank);
  publish(&cma_probe_word_);
  sync();
  int failure = 0, failed_peer = -1;
  for (int q = 0; q < cfg_.size && failure == 0; ++q) {
    if (q == cfg_.rank) continue;
    std::uint64_t word = 0;
    failure = cma_pull_bytes(peer_pid(q), &word, peer_send(q), sizeof word);
    if (failure == 0 && word != kProbeMagic + static_cast<std::uint64_t>(q)) failure = EIO;
    if (failure != 0) failed_peer = q;
  }
  set_cma_status(failure);
  sync();
  cma_ = Cma::on;
  for (int q = 0; q < cfg_.size; ++q) {
    if (cma_status_of(q) != 0) cma_ = Cma::off;
  }
  if (failure != 0) {
    SYNK_LOG_AT(info, "shm: rank " << cfg_.rank << " cannot read rank " << failed_peer
                                   << "'s memory (process_vm_readv: " << std::strerror(failure)
                                   << "); large copies go through the shared slots");
  } else if (cfg_.rank == 0) {
    SYNK_LOG_AT(info, "shm: cross-memory attach " << (cma_ == Cma::on ? "on" : "off")
                                                  << " for copies of at least "
                                                  << cfg_.cma_min_bytes << " bytes");
  }
}

void Group::cma_pull(int peer, void* local, std::uint64_t remote, std::size_t bytes) {
  if (bytes == 0 || cma_errno_ != 0) return;
  cma_errno_ = cma_pull_bytes(peer_pid(peer), local, remote, bytes);
  if (cma_errno_ != 0) cma_failed_peer_ = peer;
}

// A failed copy still takes part in the closing sync, so every rank leaves the call together
// and throws the same error; a peer that died is found by the sync's liveness check.
void Group::finish_cma() {
  const int failure = cma_errno_, peer = cma_failed_peer_;
  cma_errno_ = 0;
  cma_failed_peer_ = -1;
  set_cma_status(failure == 0 ? 0 : (static_cast<std::int64_t>(peer) << 32) | failure);
  sync();
  for (int q = 0; q < cfg_.size; ++q) {
    const std::int64_t s = cma_status_of(q);
    if (s == 0) continue;
    const int err = static_cast<int>(s & 0xffffffff), other = static_cast<int>(s >> 32);
    if (err == ESRCH) {
      // The peer died after it posted this sync (a root waiting for its pullers, killed):
      // the same error every other rank's liveness check gives, naming the dead rank.
      broken_ = true;
      detail::note_peer_lost();
      throw Error(ErrorCode::Remote,
                  std::string(op_name_) + ": rank " + std::to_string(other) + " (pid " +
                      std::to_string(peer_pid(other)) + ") died; rank " + std::to_string(q) +
                      " could not copy from it (process_vm_readv: " + std::strerror(err) + ")");
    }
    const std::string what = std::string(op_name_) + ": rank " + std::to_string(q) +
                             " could not copy from/to rank " + std::to_string(other) + ": " +
                             std::strerror(err);
    throw Error(q == cfg_.rank ? ErrorCode::System : ErrorCode::Remote, what);
  }
}

void Group::scatter_cma(const void* send, void* recv, std::size_t count, DataType t, int root) {
  const std::size_t bytes = count * size_of(t);
  settle();
  publish(send);
  sync();
  const std::size_t mine = static_cast<std::size_t>(cfg_.rank) * bytes;
  if (cfg_.rank == root) {
    copy(recv, cat(send, mine), bytes);  // nothing to do in place
  } else {
    cma_pull(root, recv, peer_send(root) + mine, bytes);
  }
  finish_cma();
}

}  // namespace synk::shm
