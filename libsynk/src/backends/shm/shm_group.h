// shm::Group: the ranks of one node exchanging data through one shared-memory segment. No MPI
// here: the MPI bootstrap is in shm_backend.cc and the tests drive a Group from forked
// processes.
//
// A Group is made of parts, each in a file of its own: the step channel (step_channel.h: post,
// arrive, wait, call checks, liveness), the slot arena (slot_arena.h), the node buffers
// (node_buffers.h) and the CMA pull (cma_pull.h). Its collectives run one algorithm each
// (algorithms/, one to a file), chosen per call in shm_collectives.cc from the call's size, the
// thresholds of GroupConfig and what was measured on this host (algo_chooser.h,
// store_tuner.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backends/shm/algo_chooser.h"
#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/cma_pull.h"
#include "backends/shm/group_config.h"
#include "backends/shm/node_buffers.h"
#include "backends/shm/slot_arena.h"
#include "backends/shm/step_channel.h"
#include "backends/shm/store_tuner.h"
#include "core/backend.h"
#include "synk/error.h"

namespace synk::shm {

class Group {
 public:
  static constexpr std::uint64_t kEagerDepth = shm::kEagerDepth;
  static constexpr std::size_t kEagerBytes = shm::kEagerBytes;
  static constexpr std::size_t kTinyBytes = shm::kTinyBytes;

  // Bytes of the segment a group of `size` ranks with `slot_bytes` slots needs.
  static std::size_t segment_bytes(int size, std::size_t slot_bytes);

  // `base` is the mapped segment (zero-filled when made). Records this rank's pid there.
  Group(void* base, const GroupConfig& config);
  // SYNK_LOG=info: rank 0 prints the selection table (selection_table.h) if it has rows.
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  // The collectives, on arguments already validated; a.coll names the collective called (the
  // algorithms read it) and a broadcast's buffer is a.recv.
  void all_reduce(const detail::CollArgs& a);
  void reduce(const detail::CollArgs& a);
  void broadcast(const detail::CollArgs& a);
  void all_gather(const detail::CollArgs& a);
  void gather(const detail::CollArgs& a);
  void gatherv(const detail::CollArgs& a);
  void scatterv(const detail::CollArgs& a);
  void scatter(const detail::CollArgs& a);
  void reduce_scatter(const detail::CollArgs& a);
  void all_to_all(const detail::CollArgs& a);
  void all_to_allv(const detail::CollArgs& a);
  void barrier();
  // Takes part in the call `c` only to fail it (StepChannel::reject). Always throws.
  [[noreturn]] void reject(detail::Collective c, ErrorCode code, const std::string& message,
                            const char* name = nullptr);
  // The same for the call `a` whose arguments this rank rejected: it first counts the call in
  // the algorithm chooser as the ranks that take it do, so that their trials stay in step.
  [[noreturn]] void reject(const detail::CollArgs& a, ErrorCode code, const std::string& message);

  // This rank's work outside the group moved on: the ranks waiting for it wait on past
  // SYNK_TIMEOUT while it does (StepChannel::note_progress).
  void note_progress() { steps_.note_progress(); }
  // This rank works outside the group within its call (StepChannel::set_outside).
  bool set_outside(bool outside) { return steps_.set_outside(outside); }
  // This rank makes no more calls in the group (StepChannel::close).
  void close() { steps_.close(); }

  // Node buffers (NodeBuffers::add_region, dropped_here, release).
  int add_region(unsigned char* base, std::size_t stride, std::size_t bytes,
                 std::shared_ptr<void> keep);
  std::vector<std::uint8_t> dropped_regions() const { return node_.dropped_here(); }
  void release_regions(const std::vector<std::uint8_t>& dropped_everywhere) {
    node_.release(dropped_everywhere);
  }

  int rank() const { return cfg_.rank; }
  int size() const { return cfg_.size; }
  std::string rank_text(int group_rank) const { return cfg_.rank_text(group_rank); }
  // Whether large copies go straight between the ranks' buffers: known after the first call
  // of at least cma_min_bytes (false before).
  bool cma_on() const { return cma_.on(); }
  // The measured choice between the slots and cross-memory attach (for tests and the log).
  const AlgoChooser& algo_chooser() const { return algo_chooser_; }
  // What was chosen so far, per collective and size class (selection_table.h).
  std::string selection_table() const;
  bool polls_before_yielding() { return steps_.polls_before_yielding(); }

 private:
  // Every public collective is begin(), one algorithm, end().
  void begin(const detail::CollArgs& a);
  void end();  // throws a mismatch of an earlier call found during this one

  // Whether this call of a chosen collective (algo_chooser.h) with `bytes` per rank runs by
  // cross-memory attach; collective: every rank of a matching call decides alike. In a trial,
  // end() times its run (time_algo_trial) and, at the end of the trial, agree_on_algo() settles
  // the choice on every rank in one more step (algo_trial.cc).
  bool cma_chosen(detail::Collective c, std::size_t bytes);
  // The bytes per rank that a call of `a` asks the chooser about (cma_chosen), or 0 where its
  // size alone fixes its way (shm_collectives.cc).
  std::size_t chosen_bytes(const detail::CollArgs& a) const;
  void time_algo_trial();
  void agree_on_algo();

  GroupConfig cfg_;
  StepChannel steps_;
  SlotArena slots_;
  NodeBuffers node_;
  CmaPull cma_;
  Parts parts_{steps_, slots_, node_, cma_};
  StoreTuner store_tuner_;
  std::chrono::steady_clock::time_point call_start_;  // read when store_tuner_.timing()
  AlgoChooser algo_chooser_;
  bool algo_chosen_ = false;  // this call asked algo_chooser_ (cma_chosen)
  std::chrono::steady_clock::time_point algo_call_start_;  // of a call timed for the chooser
  double algo_run_s_ = 0;  // the timed part of the trial's run under way so far
};

}  // namespace synk::shm
