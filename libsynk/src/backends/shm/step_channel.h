// The step channel of a shm::Group: how its ranks post steps, wait for each other, check each
// other's calls and notice a dead or stuck peer. The slot arena, the node buffers and the CMA
// pull work through it; the algorithms (algorithms/) are written against those parts.
//
// A collective runs in steps. In each step a rank writes (its slot, or for small calls its
// eager entry, or for tiny ones, up to kTinyBytes, the compact copy of its call: shm_layout.h,
// StepCall), posts its step counter (release), and then, depending on its part, waits for every
// rank (sync), for the one rank it reads from (sync_with) or for nobody (post: a rank that only
// writes, like the root of a broadcast, goes on at once, as MPI's eager sends do). Every post
// also publishes the call's descriptor in the rank's entry for that step, and again in its
// StepCall, and every rank compares every peer's call with its own, step by step, as far as the
// peers have posted ("checked"; from the entries where it has just read them, else from the
// StepCalls); a rank never reads what another wrote in a step before it compared their calls. A
// rank's "done" counter says up to which step it has finished reading and checking; a rank
// reuses shared memory of step s only when every peer is done with it (step_sync.cc). So a rank
// that only writes can run up to kEagerDepth steps ahead, and a mismatch reaches it late: within
// its current call it throws at once; found in an earlier call, it is thrown when the current
// call has completed.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/shm/group_config.h"
#include "backends/shm/shm_layout.h"
#include "core/backend.h"
#include "synk/error.h"

namespace synk::shm {

class StepChannel {
 public:
  // `blocks` are the ranks' control blocks (shm_layout.h), zero-filled when made. Records this
  // rank's pid and CPUs there.
  StepChannel(unsigned char* blocks, const GroupConfig& config);
  // A mismatch in this rank's last call that no later call reported goes to stderr, if every
  // peer has already arrived there (never waits).
  ~StepChannel();
  StepChannel(const StepChannel&) = delete;
  StepChannel& operator=(const StepChannel&) = delete;

  // Bytes of the control blocks of `size` ranks, a whole number of pages.
  static std::size_t control_bytes(int size);

  int rank() const { return cfg_.rank; }
  // "3", or "3 (job rank 5)": GroupConfig::rank_text, for messages.
  std::string rank_text(int group_rank) const { return cfg_.rank_text(group_rank); }
  int size() const { return cfg_.size; }

  // Every call is begin_call(), its steps, end_call(). end_call throws a mismatch of an earlier
  // call found during this one.
  // `name` is what errors call it (CollArgs::name), null for c's own name.
  void begin_call(detail::Collective c, std::size_t count, DataType t, ReduceOp op, int root,
                  const char* name = nullptr);
  void end_call();
  // Takes part in the call `c` only to fail it: this rank's arguments were rejected (message).
  // Every rank then throws, after the same number of steps, so the group stays in step: the
  // others a Remote error naming this rank (one that only writes in that call, at its next
  // call, as for any mismatch), this rank its own error. Always throws.
  [[noreturn]] void reject(detail::Collective c, ErrorCode code, const std::string& message,
                            const char* name = nullptr);
  // This rank's work outside the group moved on (StepChannel::wait_until's deadline).
  void note_progress();
  // This rank works outside the group, within its call (true), or no longer (false); returns
  // what it was.
  bool set_outside(bool outside);
  const char* op_name() const { return op_name_; }
  const Call& call() const { return call_; }

  // A step starts with next_step() and ends with sync(), post() or sync_with(); a second sync
  // in one step needs no next_step(). next_step waits until every peer is done with the shared
  // memory this step overwrites: the slots of two steps ago, or for an `eager` step only this
  // rank's entry and StepCall of kEagerDepth steps ago. eager_bytes: what an eager step puts
  // into each rank's part (eager_out); up to kTinyBytes the step is tiny.
  void next_step(bool eager = false, std::size_t eager_bytes = kEagerBytes);
  void settle();  // the same wait as a slot step's, for words written outside next_step
  void sync();    // post, wait for every rank, check this step against every rank
  void arrive();  // the second half of sync(), after a post() and work of this rank's own
  void post();    // post only: this rank wrote and reads nothing in this step
  void sync_with(int peer);  // post, wait for `peer` only and check its call: I read only it
  // This step's eager data (in the entry, or the StepCall of a tiny step): mine to write
  // (before posting), a peer's to read (after).
  unsigned char* eager_out();
  const unsigned char* eager_in(int peer) const;
  // Whether each post first fences the streaming stores of this call (stream_copy.h): set per
  // call by the slot arena, whose copies may stream.
  void fence_posts(bool on) { fence_posts_ = on; }
  // The step last begun with next_step, by its number (its parity picks the slot set). A step
  // number, not a count of data steps: every rank posts the same steps, so after a call that
  // failed, where one rank began a step with next_step and another with settle (a rejection
  // against a cross-memory-attach probe), the ranks still pick the same slots.
  std::uint64_t data_steps() const { return step_; }

  // A slot step publishes four words with each of its posts, in its entry (whose data a slot
  // step does not use otherwise): two for the slot arena (where its data sit in the slots), two
  // for the node buffers (what it offers to be read in place). mark_slot_step zeroes them.
  static constexpr int kStepWords = 4;
  enum StepWord : int { kSrcShift = 0, kDstShift = 1, kOfferRegion = 2, kOfferOffset = 3 };
  void mark_slot_step() {
    slot_step_ = true;
    for (std::uint64_t& w : words_) w = 0;
  }
  void set_step_word(int word, std::uint64_t v) { words_[word] = v; }
  std::uint64_t peer_step_word(int peer, int word) const;  // of the step last posted

  // Per-rank words outside the steps, published by the next post.
  void set_status(std::int64_t v);  // gatherv's verdict, a trial's costs
  std::int64_t status_of(int peer) const;
  layout::RankBlock& block(int r) const { return layout::block_at(blocks_, r); }
  std::size_t peer_call_count(int peer) const;  // the count in peer's current call descriptor
  pid_t peer_pid(int peer) const;
  // A peer died while this rank depended on it: the group cannot be trusted any more.
  void mark_broken();
  // This rank makes no more calls here (the group goes, or MPI is finalized): its reads are
  // done, and a peer waiting for a step it never posts fails at once, saying so. Nothing in a
  // child forked after the group was made, which shares the parent's block.
  void close();

  // Whether a waiting rank polls for GroupConfig::spin_us before it yields (every rank has a CPU
  // of its own) or yields after a few polls: false until every peer has published its CPUs,
  // which each does when its Group is made.
  bool polls_before_yielding();

 private:
  struct Mismatch {
    ErrorCode code;
    std::string message;
  };

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
  void report(std::uint64_t step, Mismatch&& m);  // throws, or keeps it for end_call()
  void publish_done();
  const std::atomic<std::uint64_t>& posted_word(int peer) const;  // peer's step, to wait on
  bool posted(int peer, std::uint64_t step) const;  // peer's entry and StepCall of `step` are out
  // Waits until `word` (of `peer`'s block) reaches target, spinning then yielding; throws if
  // the peer dies or SYNK_TIMEOUT passes; keeps this rank's checks going meanwhile.
  void wait_until(int peer, const std::atomic<std::uint64_t>& word, std::uint64_t target);
  void decide_spin();  // once every peer has published its CPUs; until then the short spin
  bool peer_alive(int peer) const;
  bool owned_here() const;  // this process made the group (not a child forked since)
  [[noreturn]] void throw_died(int peer);
  [[noreturn]] void throw_closed(int peer);
  // The peer a wait gave up on, for its Timeout: "rank 2, which has not reached this call", or,
  // where the peer is in its call's step between the nodes (hier), what it waits for there.
  std::string late_peer_text(int peer) const;
  [[noreturn]] void throw_failed_and_closed(int peer);  // closed after a call of its failed
  void report_at_close(const char* what);  // an error found in the destructor
  bool peer_ends_soon(int peer) const;  // within kClosedPeerExitGrace
  bool peer_moved_on(int peer, std::uint64_t& seen) const;
  // A peer other than `waited` that died, or closed the group, before posting the step this
  // rank has posted: the call can never end, and the rank waited for may be waiting for it.
  void throw_if_a_lagging_peer_died(int waited);
  std::string describe_call(int peer, std::uint64_t step) const;

  GroupConfig cfg_;
  unsigned char* blocks_;
  std::uint64_t seq_ = 0;       // steps posted by this rank; every rank posts the same steps
  std::uint64_t checked_ = 0;   // every peer's call up to this step compared with mine
  std::uint64_t finished_ = 0;  // this rank has finished reading every step up to this one
  std::uint64_t published_done_ = 0;
  std::uint64_t peers_done_ = 0;  // the least done counter of the peers, last time looked
  std::uint64_t reported_ = 0;  // a step whose mismatch this rank has thrown already
  std::uint64_t calls_ = 0;     // calls begun
  std::uint64_t call_first_step_ = 1;  // the first step of the current call
  std::uint64_t step_ = 0;      // the step last begun with next_step
  bool tiny_ = false;           // this step is tiny (next_step): its data are in the StepCalls
  bool slot_step_ = false;      // this step is a slot step: post() writes words_
  bool fence_posts_ = false;
  std::uint64_t words_[kStepWords] = {};
  Call call_;                   // the current call's descriptor
  const char* op_name_ = "";
  bool deferred_ = false;       // a mismatch of an earlier call, for end_call()
  Mismatch deferred_error_{ErrorCode::InvalidUsage, {}};
  bool broken_ = false;  // a peer died, timed out or left: the group cannot be trusted any more
  // How a waiting rank waits: spin_iterations_ polls, then (where every rank has a CPU of its
  // own) more polls for spin_before_yield_, then polls with a sched_yield before each.
  // decide_spin() settles them once every rank's CPUs are known.
  int spin_iterations_ = 0;
  std::chrono::steady_clock::duration spin_before_yield_{};
  bool spin_decided_ = false;
  std::uint64_t pid_namespace_ = 0;  // this process's (peer_alive)
  // Whether peer_alive looks at each peer's pid, decided the first time it is needed.
  enum class Watch : std::uint8_t { unknown, yes, no };
  mutable std::vector<Watch> watched_;
};

}  // namespace synk::shm
