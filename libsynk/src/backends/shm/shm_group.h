// shm::Group: the ranks of one node exchanging data through one shared-memory segment.
// Synchronization is by per-rank monotonic counters (release on post, acquire on wait); each
// collective runs in steps through two alternating sets of per-rank slots, so one sync per
// step is enough to make reuse safe (see shm_group.cc). No MPI here: the MPI bootstrap is in
// shm_backend.cc and the tests drive a Group from forked processes.
//
// Calls are checked against each other (same collective, count, type, op, root) before any
// rank reads what another wrote. The root of a broadcast and the non-roots of a one-step
// reduce only write: they post their step and return without waiting, as MPI's eager sends
// do. They check that call at their next one, and a mismatch found there is thrown once that
// next call has completed (the other ranks of the bad call have thrown already).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <sys/types.h>

#include "core/backend.h"
#include "synk/error.h"

namespace synk::shm {

struct GroupConfig {
  int rank = 0;
  int size = 1;
  std::size_t slot_bytes = std::size_t{1} << 20;  // per rank per set; a multiple of 4096
  std::size_t small_bytes = 32 * 1024;  // all_reduce up to this many bytes: one-step algorithm
  // scatters of at least this many bytes per rank: each rank pulls its block straight out of
  // the root's buffer (cross-memory attach, shm_cma.cc); 0: never.
  std::size_t cma_min_bytes = std::size_t{1} << 20;
  double timeout_s = 300.0;
};

class Group {
  enum class Cma { unknown, on, off };

 public:
  // Bytes of the segment a group of `size` ranks with `slot_bytes` slots needs.
  static std::size_t segment_bytes(int size, std::size_t slot_bytes);

  // `base` is the mapped segment (zero-filled when made). Records this rank's pid there.
  Group(void* base, const GroupConfig& config);
  // A mismatch in this rank's last call that no later call reported goes to stderr, if every
  // peer has already arrived there (never waits).
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  // The collectives, on arguments already validated (as in detail::CollArgs).
  void all_reduce(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op);
  void reduce(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op, int root);
  void broadcast(void* buf, std::size_t count, DataType t, int root);
  void all_gather(const void* send, void* recv, std::size_t count, DataType t);
  void gather(const void* send, void* recv, std::size_t count, DataType t, int root);
  void gatherv(const void* send, std::size_t count, void* recv,
               std::span<const std::size_t> recv_counts, DataType t, int root);
  void scatter(const void* send, void* recv, std::size_t count, DataType t, int root);
  void reduce_scatter(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op);
  void barrier();
  // Takes part in the call `c` only to fail it: this rank's arguments were rejected (message).
  // Every rank then throws at the call's first sync, so the group stays in step: the others a
  // Remote error naming this rank, this rank its own error. Always throws.
  [[noreturn]] void reject(detail::Collective c, ErrorCode code, const std::string& message);

  int rank() const { return cfg_.rank; }
  int size() const { return cfg_.size; }
  // Whether large copies go straight between the ranks' buffers: known after the first call
  // of at least cma_min_bytes (false before).
  bool cma_on() const { return cma_ == Cma::on; }

  struct Call;  // the descriptor of one collective call, exchanged at its first sync

 private:

  struct Mismatch {
    ErrorCode code;
    std::string message;
  };

  // Every public collective is begin(), its steps, end(). Each step starts with next_step()
  // and ends with one of sync(), post() or sync_with().
  void begin(detail::Collective c, std::size_t count, DataType t, ReduceOp op, int root);
  void end();   // throws a mismatch of the previous call found late (see the file comment)
  void sync();  // post my counter, wait for every rank; the first sync of a call checks calls
  void post();  // a step where this rank only writes: post my counter and go on
  void sync_with(int peer);  // a step where this rank only reads what `peer` wrote
  // Waits until every peer has posted my last step (so they are done reading what I wrote
  // before it) and runs a check of calls that is due. `defer`: keep its failure for end().
  void settle(bool defer);
  void wait_for(int peer, std::uint64_t target);
  // The current call's descriptors of every rank (peer -1) or of `peer` only, against mine.
  bool calls_match(int peer, Mismatch* m) const;
  void check_calls(int peer = -1);
  bool peer_alive(int peer) const;
  std::string describe_call(int peer) const;
  void next_step();
  std::size_t peer_call_count(int peer) const;  // the count in peer's current call descriptor
  void set_status(std::int64_t v);              // this rank's status word (gatherv verdict)
  std::int64_t status_of(int peer) const;

  unsigned char* slot(int peer) const;  // this step's slot of `peer`
  unsigned char* result() const;        // this step's shared result area
  std::size_t slot_elems(DataType t) const { return cfg_.slot_bytes / size_of(t); }
  // [lo, hi) of `count` elements that `peer` reduces, split on 64-byte boundaries.
  void slice(int peer, std::size_t count, std::size_t es, std::size_t* lo, std::size_t* hi) const;
  void reduce_slice(std::size_t lo, std::size_t hi, std::size_t src_offset, void* dst, DataType t,
                    ReduceOp op, const void* own = nullptr);

  void all_reduce_small(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op);
  void reduce_large(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op,
                    int root);  // root -1: every rank receives (all_reduce)
  void gather_common(const void* send, void* recv, std::size_t count, DataType t, int root);

  // Cross-memory attach (process_vm_readv, shm_cma.cc): one copy instead of two.
  bool use_cma(std::size_t bytes);  // collective: every rank of a matching call decides alike
  void probe_cma();
  void publish(const void* send);  // my send buffer's address, for the peers
  std::uint64_t peer_send(int peer) const;
  void set_cma_status(std::int64_t v);  // published by the next sync
  std::int64_t cma_status_of(int peer) const;
  pid_t peer_pid(int peer) const;
  // Copies from peer's address space; on failure records it for finish_cma().
  void cma_pull(int peer, void* local, std::uint64_t remote, std::size_t bytes);
  void finish_cma();  // the closing sync; throws on every rank if any rank's copy failed
  void scatter_cma(const void* send, void* recv, std::size_t count, DataType t, int root);

  GroupConfig cfg_;
  unsigned char* base_;
  unsigned char* blocks_;
  unsigned char* data_;
  std::uint64_t seq_ = 0;    // syncs done by this rank; every rank does the same number
  std::uint64_t calls_ = 0;  // calls begun
  std::uint64_t step_ = 0;   // data steps begun; its parity picks the slot set
  std::uint64_t known_ = 0;  // every peer has posted at least this seq
  bool check_pending_ = false;  // this call (or the last one) has not been checked yet
  std::uint64_t check_from_ = 0;  // the first seq of the call whose check is pending
  const char* check_name_ = "";   // and its name
  bool deferred_ = false;         // a mismatch of the previous call, for end()
  Mismatch deferred_error_{ErrorCode::InvalidUsage, {}};
  const char* op_name_ = "";
  bool broken_ = false;  // a peer died or timed out: the group cannot be trusted any more
  int spin_iterations_ = 0;  // before a waiting rank yields its core
  Cma cma_ = Cma::unknown;
  int cma_errno_ = 0;         // this call's first failed copy (0: none), reported by finish_cma
  int cma_failed_peer_ = -1;
  std::uint64_t cma_probe_word_ = 0;
};

}  // namespace synk::shm
