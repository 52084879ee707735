// The CMA pull: cross-memory attach (process_vm_readv), one copy between the ranks' own buffers
// instead of two through the slots, as Open MPI's vader does. The algorithms that use it are in
// algorithms/*_cma.cc: scatter from SYNK_SHM_CMA_BYTES per rank; broadcast, all_gather, gather,
// all_reduce and reduce where the measurement of algo_chooser.h finds it faster. A call is: open (publish the buffer
// peers read, sync, which also checks the calls), pull, finish (sync); the closing sync keeps
// every buffer read alive and unchanged until the last pull.
//
// The kernel allows these calls only where ptrace would be allowed (same user; Yama's
// ptrace_scope; seccomp in some containers), so the first eligible call probes every pair of
// ranks, and the group keeps to the slot path if any pair fails. SYNK_SHM_CMA_BYTES=0 turns it
// off.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/shm/step_channel.h"

namespace synk::shm {

class CmaPull {
 public:
  // min_bytes: the least a scatter's block must have to be pulled (0: never pull at all).
  CmaPull(StepChannel& steps, std::size_t min_bytes);

  // Collective: whether a call of `bytes` per rank pulls (probing on the first such call);
  // every rank of a matching call decides alike.
  bool usable(std::size_t bytes);
  // Whether pulls are allowed and not known to fail (before the probe: true).
  bool may_be_on() const;
  bool on() const { return state_ == State::on; }  // probed, and every pair could pull
  bool known() const { return state_ != State::unknown; }
  void probe();  // collective: two syncs

  // The opening step of a single-copy call: publishes `mine` (this rank's buffer that peers
  // read) and `second` (one more, for calls that read two: all_reduce reads the others' send,
  // then their recv) and syncs, which also checks the calls. Nothing may be published again
  // until every peer is done with the words: only finish() ends the call.
  void open(const void* mine, const void* second = nullptr);
  // What `peer` published (which: 0 mine, 1 second), in its address space.
  std::uint64_t peer_buffer(int peer, int which = 0) const;
  // Copies from peer's address space; on failure records it for finish().
  void pull(int peer, void* local, std::uint64_t remote, std::size_t bytes);
  void finish();  // the closing sync; throws on every rank if any rank's copy failed

  // What the reducing pulls take from all peers at a time (algorithms/reduction.h): small
  // enough to stay in L2 until reduced.
  static constexpr std::size_t kPieceBytes = std::size_t{256} << 10;
  unsigned char* scratch(std::size_t bytes);  // this rank's, at least `bytes`

 private:
  enum class State { unknown, on, off };
  void publish(const void* mine, const void* second);
  void set_status(std::int64_t v);  // published by the next sync
  std::int64_t status_of(int peer) const;

  StepChannel& steps_;
  std::size_t min_bytes_;
  State state_ = State::unknown;
  int errno_ = 0;  // this call's first failed copy (0: none), reported by finish()
  int failed_peer_ = -1;
  std::uint64_t probe_word_ = 0;
  std::vector<unsigned char> scratch_;
};

}  // namespace synk::shm
