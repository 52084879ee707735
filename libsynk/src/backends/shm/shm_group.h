// shm::Group: the ranks of one node exchanging data through one shared-memory segment.
// No MPI here: the MPI bootstrap is in shm_backend.cc and the tests drive a Group from forked
// processes.
//
// A collective runs in steps. In each step a rank writes (its slot, or for small calls its
// eager entry, or for tiny ones, up to kTinyBytes, the compact copy of its call: shm_layout.h,
// StepCall), posts its step counter (release), and then, depending on its
// part, waits for every rank (sync), for the one rank it reads from (sync_with) or for nobody
// (post: a rank that only writes, like the root of a broadcast, goes on at once, as MPI's
// eager sends do). Every post also publishes the call's descriptor in the rank's entry for
// that step, and again in its StepCall, and every rank compares every peer's call with its
// own, step by step, as far as the peers have posted ("checked"; from the entries where it
// has just read them, else from the StepCalls); a rank never reads what another wrote in a
// step before it compared their calls. A rank's "done" counter says up to which step it has
// finished reading and checking; a rank reuses shared memory of step s only when every peer
// is done with it (shm_sync.cc). So a rank that only writes can run up to kEagerDepth steps ahead,
// and a mismatch reaches it late: within its current call it throws at once; found in an
// earlier call, it is thrown when the current call has completed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <sys/types.h>

#include "backends/shm/algo_chooser.h"
#include "backends/shm/store_tuner.h"
#include "core/backend.h"
#include "synk/error.h"

namespace synk::shm {

struct GroupConfig {
  int rank = 0;
  int size = 1;
  std::size_t slot_bytes = std::size_t{1} << 20;  // per rank per set; a multiple of 4096
  std::size_t small_bytes = 32 * 1024;  // all_reduce up to this many bytes: one-step algorithm
  // reduce up to this many bytes, or of any size on 2 ranks: the root reduces everything
  // (more: every rank a slice, as in all_reduce).
  std::size_t root_reduces_bytes = std::size_t{4} << 20;
  // scatters of at least this many bytes per rank: each rank pulls its block straight out of
  // the root's buffer (cross-memory attach, shm_cma.cc); 0: never, for any collective.
  std::size_t cma_min_bytes = std::size_t{1} << 20;
  // SYNK_SHM_ALGO: the ways forced for broadcast, all_gather and gather (algo_chooser.h);
  // the others are measured.
  ForcedAlgos forced_algos{};
  double timeout_s = 300.0;
  double stall_warn_s = 60.0;  // a wait this long is one warning line (SYNK_STALL_WARN)
  StoreMode store_mode = StoreMode::tuned;  // how large calls write the slots (store_tuner.h)
  // Where every rank has a CPU of its own (cpu_share.h), a waiting rank polls this long before
  // it starts yielding its core; where ranks share CPUs it yields after a few polls.
  std::uint32_t spin_us = 2000;
  // A waiting rank that has yielded for a while sleeps between polls instead: for calls made on
  // a thread beside the caller's computation (KeyValue's engine), whose waits for a rank that
  // has not pushed yet may last as long as that rank's computation.
  bool sleep_when_waiting = false;
  // Ranks of the job on this machine, this group's and others' (more than `size` where
  // SYNK_SIMULATE_NODES splits a machine into groups): with fewer CPUs than these, the ranks
  // share CPUs whatever this group's affinity masks say. 0: `size`.
  int machine_ranks = 0;
};

class Group {
  enum class Cma { unknown, on, off };

 public:
  // Steps a rank that only writes may run ahead of the others (entries and StepCalls per
  // rank), and the data an entry holds: an all_reduce of up to this many bytes travels in the
  // entries instead of the slots (the other collectives' limits are in shm_collectives.cc).
  static constexpr std::uint64_t kEagerDepth = 64;
  static constexpr std::size_t kEagerBytes = 2048;
  // An eager step that puts at most this much into each rank's part is tiny: its data travel
  // with the step's compact call (shm_layout.h, StepCall), two steps to a cache line.
  static constexpr std::size_t kTinyBytes = 8;

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
  // Every rank then throws, after the same number of steps, so the group stays in step: the
  // others a Remote error naming this rank (one that only writes in that call, at its next
  // call, as for any mismatch), this rank its own error. Always throws.
  [[noreturn]] void reject(detail::Collective c, ErrorCode code, const std::string& message);

  // Node buffers (synk/node_buffer.h): memory every rank has mapped, rank r's part at
  // base + r * stride, `bytes` long. Every rank adds the same regions in the same order (the
  // allocation is collective). The group keeps the mapping (`keep`) alive as long as it lives,
  // since a peer may read this rank's part in any later call. Returns the region's index.
  int add_region(unsigned char* base, std::size_t stride, std::size_t bytes,
                 std::shared_ptr<void> keep);

  int rank() const { return cfg_.rank; }
  int size() const { return cfg_.size; }
  // Whether large copies go straight between the ranks' buffers: known after the first call
  // of at least cma_min_bytes (false before).
  bool cma_on() const { return cma_ == Cma::on; }
  // The measured choice between the slots and cross-memory attach (for tests and the log).
  const AlgoChooser& algo_chooser() const { return algo_chooser_; }
  // Whether a waiting rank polls for GroupConfig::spin_us before it yields (every rank has a CPU
  // of its own) or yields after a few polls: false until every peer has published its CPUs,
  // which each does when its Group is made.
  bool polls_before_yielding();

  // The descriptor of one call, published with each of its steps (24 bytes).
  struct Call {
    std::uint64_t count = 0;
    std::uint64_t number = 0;
    std::int32_t root = 0;
    std::int8_t coll = 0;
    std::int8_t dtype = 0;
    std::int8_t op = 0;
    std::int8_t error_code = -1;  // or the ErrorCode of this rank's rejected arguments
  };

 private:

  struct Mismatch {
    ErrorCode code;
    std::string message;
  };

  // Every public collective is begin(), its steps, end(). A step starts with next_step() and
  // ends with sync(), post() or sync_with(); a second sync in one step needs no next_step().
  void begin(detail::Collective c, std::size_t count, DataType t, ReduceOp op, int root);
  void end();  // throws a mismatch of an earlier call found during this one
  // Waits until every peer is done with the shared memory this step overwrites: the slots of
  // two steps ago, or for an `eager` step only this rank's entry and StepCall of kEagerDepth
  // steps ago.
  // eager_bytes: what an eager step puts into each rank's part (eager_out); up to kTinyBytes
  // the step is tiny.
  void next_step(bool eager = false, std::size_t eager_bytes = kEagerBytes);
  // next_step() for a step that puts at most `bytes` into each slot (and the result area):
  // it places them at an offset that walks through the slot from one use of the set to the
  // next (shm_sync.cc says why), or, without `walk`, always at its start.
  void next_slot_step(std::size_t bytes, bool walk = true);
  // For a step in which every rank reads only slots their owners wrote (broadcast, the
  // gathers): this rank's data in its slot starts as far into a page as own_src (this
  // rank's source, or null if it writes none) does, and every rank reads each peer's slot at
  // the place that peer published (shm_sync.cc says why). Every rank of the call calls it.
  // own_dst (this rank's destination, or null) is published too, for place_result.
  void shift_slots(const void* own_src, const void* own_dst = nullptr);
  std::size_t peer_shift(int peer, int word = 0) const;  // a peer's published place
  // After this step's first sync, in a step that shift_slots placed: the shared result area
  // starts as far into a page as `owner`'s destination does (all_reduce: rank 0's; reduce:
  // the root's). Read once here: a later post of the step moves seq_ past the entry.
  void place_result(int owner);
  // Zero-copy reads of node buffers. In a slot step of all_gather or a large all_reduce or
  // reduce, a rank whose source of this step lies in its part of a region offers it
  // instead of copying it into its slot: post() publishes where (words 2 and 3 of the entry;
  // every slot step publishes them, 0 when nothing is offered), and each reader takes that
  // rank's data from the region, after the step's check of its entry, where it would have
  // taken it from the slot. A rank whose data was read in place must not return before its
  // readers are done: those calls end with one more sync (shm_collectives.cc).
  // offer() returns true if src is offered in this step. A call that streams its copies into the
  // slots offers nothing. The store tuner streams where the readers do not share this rank's
  // last-level cache and streaming measured faster; a reader there takes lines this rank just wrote
  // across the fabric: with new data every call (synk-bench -F 1, 2 ranks, two L3s, offered
  // whatever the tuner chose) all_gather of 4-16 MiB ran at 1.6-2.3x MPI read in place against
  // 2.1-3.0x through streamed slots. So the tuner's timing of its two ways now picks between
  // reading in place and streaming. (One L3, launches alternated with and without node buffers,
  // 5-15 rows each, medians: all_gather of 64 KiB-4 MiB 1.63-1.92x -> 2.17-3.46x MPI, 1.67-2.19x ->
  // 1.71-2.99x with -F 1; all_reduce 1.97-4.11x -> 2.58-4.50x, 2.01-3.68x -> 2.70-4.00x with -F 1.
  // Two L3s, 2-9 rows each, still: all_reduce of 64 KiB-4 MiB 17% slower to 4% faster, and with
  // -F 1 all_gather 15% slower at 256 KiB and 36% at 4 MiB: the tuner keeps ordinary stores unless
  // streaming is 1.25x faster.)
  bool offer(const void* src, std::size_t bytes);
  const unsigned char* peer_region(int peer) const;  // peer's offered data of this step, or null
  // A shift is under one page, so each slot has one page more than slot_bytes.
  static constexpr std::size_t kShiftRoom = 4096;
  // Bytes between two slots: slot_bytes and the room a shift takes.
  static constexpr std::size_t slot_stride(std::size_t slot_bytes) {
    return slot_bytes + kShiftRoom;
  }
  void settle();  // the same wait as a slot step's, for writes outside next_step (CMA words)
  void sync();    // post, wait for every rank, check this step against every rank
  void arrive();  // the second half of sync(), after a post() and work of this rank's own
  void post();    // post only: this rank wrote and reads nothing in this step
  void sync_with(int peer);  // post, wait for `peer` only and check its call: I read only it
  // This step's eager data (in the entry, or the StepCall of a tiny step): mine to write
  // (before posting), a peer's to read (after).
  unsigned char* eager_out();
  const unsigned char* eager_in(int peer) const;

  // Waits until every peer's done >= done_target and this rank has checked every step up to
  // check_target (which needs the peers to have posted it).
  void wait_peers(std::uint64_t done_target, std::uint64_t check_target);
  // Compares the peers' calls with mine for the steps after checked_, up to `limit`, as far
  // as every peer has posted; publishes my done counter. at_hand: a step whose entries this
  // rank has just waited for (acquire) from every peer and read (0: none); it is compared by
  // the entries without asking whether the peers posted it.
  void catch_up(std::uint64_t limit, std::uint64_t at_hand = 0);
  // Every peer's entry of `step` (or only `peer`'s) against mine.
  bool entries_match(std::uint64_t step, int peer, Mismatch* m) const;
  void report(std::uint64_t step, Mismatch&& m);  // throws, or keeps it for end()
  void publish_done();
  const std::atomic<std::uint64_t>& posted_word(int peer) const;  // peer's step, to wait on
  bool posted(int peer, std::uint64_t step) const;  // peer's entry and StepCall of `step` are out
  // Waits until `word` (of `peer`'s block) reaches target, spinning then yielding; throws if
  // the peer dies or SYNK_TIMEOUT passes; keeps this rank's checks going meanwhile.
  void wait_until(int peer, const std::atomic<std::uint64_t>& word, std::uint64_t target,
                  const char* what);
  void decide_spin();  // once every peer has published its CPUs; until then the short spin
  bool peer_alive(int peer) const;
  std::string describe_call(int peer, std::uint64_t step) const;
  std::size_t peer_call_count(int peer) const;  // the count in peer's current call descriptor
  void set_status(std::int64_t v);              // this rank's status word (gatherv verdict)
  std::int64_t status_of(int peer) const;

  // Copies into this rank's slot (or, in a scatter, the root into another's): with the stores
  // the tuner chose for this call. Nothing moves in place.
  void copy_in(void* dst, const void* src, std::size_t bytes) const;
  // Copies into the caller's buffer: streaming when this call's output is large.
  void copy_out(void* dst, const void* src, std::size_t bytes) const;
  // copy_in(slot, src) and copy_out(own, src) in one pass over src: src is read once, a
  // piece at a time, and the second copy of each piece reads it from L1.
  void copy_in_and_out(void* slot, void* own, const void* src, std::size_t bytes) const;

  unsigned char* slot(int peer) const;  // this step's slot of `peer`, from this step's offset
  unsigned char* result() const;        // this step's shared result area, likewise
  std::size_t slot_elems(DataType t) const { return cfg_.slot_bytes / size_of(t); }
  // [lo, hi) of `count` elements that `peer` reduces, split on 64-byte boundaries.
  void slice(int peer, std::size_t count, std::size_t es, std::size_t* lo, std::size_t* hi) const;
  void reduce_slice(std::size_t lo, std::size_t hi, std::size_t src_offset, void* dst, DataType t,
                    ReduceOp op, const void* own = nullptr);

  void all_reduce_small(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op);
  void reduce_at_root(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op,
                      int root);
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
  // The opening step of a single-copy call: publishes `mine` (this rank's buffer that peers
  // read) and syncs, which also checks the calls.
  void open_cma(const void* mine);
  void finish_cma();  // the closing sync; throws on every rank if any rank's copy failed
  void scatter_cma(const void* send, void* recv, std::size_t count, DataType t, int root);
  // Whether this call of a chosen collective (algo_chooser.h) with `bytes` per rank runs by
  // cross-memory attach; collective, as use_cma. In a trial, end() times its run
  // (time_algo_trial) and, at the end of the trial, agree_on_algo() settles the choice on
  // every rank in one more step.
  bool cma_chosen(detail::Collective c, std::size_t bytes);
  void time_algo_trial();
  void agree_on_algo();
  // The single-copy algorithms (algorithms/*_cma.cc).
  void broadcast_cma(void* buf, std::size_t count, DataType t, int root);
  void gather_cma(const void* send, void* recv, std::size_t count, DataType t, int root);

  GroupConfig cfg_;
  unsigned char* base_;
  unsigned char* blocks_;
  unsigned char* data_;
  std::uint64_t seq_ = 0;       // steps posted by this rank; every rank posts the same steps
  std::uint64_t checked_ = 0;   // every peer's call up to this step compared with mine
  std::uint64_t finished_ = 0;  // this rank has finished reading every step up to this one
  std::uint64_t published_done_ = 0;
  std::uint64_t peers_done_ = 0;  // the least done counter of the peers, last time looked
  std::uint64_t reported_ = 0;  // a step whose mismatch this rank has thrown already
  std::uint64_t calls_ = 0;     // calls begun
  std::uint64_t call_first_step_ = 1;  // the first step of the current call
  std::uint64_t step_ = 0;      // data steps begun; its parity picks the slot set
  std::size_t slot_offset_ = 0;  // where this step's data starts in every slot (next_slot_step)
  bool shifted_ = false;        // this step places data in the slots by page offset (shift_slots)
  std::size_t own_shift_ = 0;   // and mine starts this far past slot_offset_
  std::size_t own_dst_shift_ = 0;  // where my destination starts in its page (shift_slots)
  std::size_t result_shift_ = 0;   // the result area starts this far past slot_offset_
  bool tiny_ = false;           // this step is tiny (next_step): its data are in the StepCalls
  bool slot_step_ = false;      // this step is a slot step (next_slot_step): post() writes offers
  std::uint64_t offer_id_ = 0;  // this step's offer (offer()): region index + 1, or 0
  std::uint64_t offer_off_ = 0;  // and where the data starts in my part of it
  struct Region {  // add_region
    unsigned char* base;
    std::size_t stride;
    std::size_t bytes;
    std::shared_ptr<void> keep;
  };
  std::vector<Region> regions_;
  Call call_;                   // the current call's descriptor
  const char* op_name_ = "";
  bool deferred_ = false;       // a mismatch of an earlier call, for end()
  Mismatch deferred_error_{ErrorCode::InvalidUsage, {}};
  bool broken_ = false;  // a peer died or timed out: the group cannot be trusted any more
  // How a waiting rank waits: spin_iterations_ polls, then (where every rank has a CPU of its
  // own) more polls for spin_before_yield_, then polls with a sched_yield before each.
  // decide_spin() settles them once every rank's CPUs are known.
  int spin_iterations_ = 0;
  std::chrono::steady_clock::duration spin_before_yield_{};
  bool spin_decided_ = false;
  Cma cma_ = Cma::unknown;
  int cma_errno_ = 0;         // this call's first failed copy (0: none), reported by finish_cma
  int cma_failed_peer_ = -1;
  std::uint64_t pid_namespace_ = 0;  // this process's (peer_alive)
  // Whether peer_alive looks at each peer's pid, decided the first time it is needed.
  enum class Watch : std::uint8_t { unknown, yes, no };
  mutable std::vector<Watch> watched_;
  std::uint64_t cma_probe_word_ = 0;
  StoreTuner store_tuner_;
  AlgoChooser algo_chooser_;
  bool algo_chosen_ = false;  // this call asked algo_chooser_ (cma_chosen)
  std::chrono::steady_clock::time_point algo_call_start_;  // of a call timed for the chooser
  double algo_run_s_ = 0;  // the timed part of the trial's run under way so far
  bool stream_ = false;  // this call's copies into the slots use non-temporal stores
  bool stream_out_ = false;  // and its copies into the caller's buffer
  // reduce_large reduces its slice in pieces of kFusedPieceBytes into scratch_ (where each
  // stays in L1) and copies them to the result area and to recv from there.
  static constexpr std::size_t kFusedPieceBytes = 32 * 1024;
  std::vector<unsigned char> scratch_ = std::vector<unsigned char>(kFusedPieceBytes);
  std::chrono::steady_clock::time_point call_start_;  // read when store_tuner_.timing()
};

}  // namespace synk::shm
