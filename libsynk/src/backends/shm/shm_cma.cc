// Cross-memory attach (process_vm_readv): one copy between the ranks' own buffers instead of two
// through the slots. The algorithms are in algorithms/*_cma.cc: scatter from SYNK_SHM_CMA_BYTES
// per rank; broadcast, all_gather and gather where the measurement of algo_chooser.h finds it
// faster. A call is: publish the send buffer's address, sync (which also checks the calls),
// copy, sync; the closing sync keeps every buffer read alive and unchanged until the last pull.
//
// The kernel allows these calls only where ptrace would be allowed (same user; Yama's
// ptrace_scope; seccomp in some containers), so the first eligible call probes every pair of
// ranks, and the group keeps to the slot path if any pair fails. SYNK_SHM_CMA_BYTES=0 turns
// it off.
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

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

void Group::open_cma(const void* mine) {
  settle();  // the published address below is rewritten: every peer must be done with it
  publish(mine);
  sync();
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

bool Group::cma_chosen(detail::Collective c, std::size_t bytes) {
  if (cfg_.cma_min_bytes == 0 || cfg_.size < 2 || cma_ == Cma::off) return false;
  const ShmAlgo way = algo_chooser_.choose(c, bytes);  // alike on every rank
  if (way == ShmAlgo::cma && cma_ == Cma::unknown) probe_cma();
  if (cma_ == Cma::off) return false;  // the chooser's trial of this class is left unfinished
  algo_chosen_ = true;
  if (algo_chooser_.timed()) algo_call_start_ = std::chrono::steady_clock::now();
  return way == ShmAlgo::cma;
}

// At the end of a call of a trial: its time counts in its run's, which begins after a sync and
// ends with one (algo_chooser.h says why); every rank takes the same syncs.
void Group::time_algo_trial() {
  using Clock = std::chrono::steady_clock;
  algo_chosen_ = false;
  const auto seconds = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  if (algo_chooser_.timed()) algo_run_s_ += seconds(algo_call_start_);
  const AlgoChooser::Mark mark = algo_chooser_.mark();
  if (mark == AlgoChooser::Mark::none) return;
  const auto sync_start = Clock::now();
  settle();
  sync();
  if (mark == AlgoChooser::Mark::start) {
    algo_run_s_ = 0;
  } else if (algo_chooser_.record(algo_run_s_ + seconds(sync_start))) {
    agree_on_algo();
  }
}

// One more step of the call that ends a trial: every rank publishes its best time of each way,
// and every rank decides from all of them, so all decide alike.
void Group::agree_on_algo() {
  const std::int64_t mine = algo_chooser_.cost_word();
  SYNK_LOG_AT(debug, "shm: " << op_name_ << " trial on rank " << cfg_.rank << ": slots "
                             << static_cast<double>(static_cast<std::uint64_t>(mine) >> 32) * 1e-3
                             << " us, cma " << static_cast<double>(mine & 0xffffffff) * 1e-3
                             << " us a call");
  settle();  // the status words below are rewritten: every peer must be done with them
  set_status(mine);
  sync();
  std::vector<std::int64_t> words(static_cast<std::size_t>(cfg_.size));
  for (int q = 0; q < cfg_.size; ++q) words[static_cast<std::size_t>(q)] = status_of(q);
  algo_chooser_.decide(words);
  if (cfg_.rank == 0) {
    const auto c = static_cast<detail::Collective>(call_.coll);
    const std::size_t bytes = call_.count * size_of(static_cast<DataType>(call_.dtype));
    const AlgoChooser::State& s = algo_chooser_.state(c, bytes);
    SYNK_LOG_AT(info, "shm: " << op_name_ << " of " << (std::size_t{1} << AlgoChooser::size_class(bytes))
                              << "+ bytes per rank: " << to_string(s.chosen) << " (slowest rank: slots "
                              << s.agreed[0] * 1e6 << " us, cma " << s.agreed[1] * 1e6
                              << " us); measured again after " << s.every << " calls");
  }
}

}  // namespace synk::shm
