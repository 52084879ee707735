// The algorithms of the shm backend, one to a file, each written against the parts of a group:
// the step channel (step_channel.h: post, arrive, wait, call check), the slot arena
// (slot_arena.h), the node buffers (node_buffers.h) and the CMA pull (cma_pull.h). Which one a
// call runs is decided in shm_collectives.cc, from its size, the thresholds and the measured
// choices (algo_chooser.h); an algorithm runs between the call's begin and end.
//
// Kinds of algorithm:
// - eager: one step through the ranks' entries (or, up to kTinyBytes per rank, through the
//   compact copies of their calls, shm_layout.h), so that a rank that only writes may run ahead;
// - slots: steps of at most one slot per rank: copy in, post (and wait for the ranks this one
//   reads from), then read what they wrote (step_sync.cc says why that is safe);
// - cma: one copy, each reader pulling straight out of the writer's buffer.
// Every algorithm takes the call as the user made it (detail::CollArgs, validated already), and
// a.coll must name the collective called: reduce_slices and the gathers serve all_reduce and
// all_gather too, and tell them apart by it (receiver()).
#pragma once

#include <cstddef>
#include <vector>

#include "backends/shm/cma_pull.h"
#include "backends/shm/node_buffers.h"
#include "backends/shm/slot_arena.h"
#include "backends/shm/step_channel.h"
#include "core/backend.h"
#include "synk/types.h"

namespace synk::shm {

struct Parts {
  StepChannel& steps;
  SlotArena& slots;
  NodeBuffers& node;
  CmaPull& cma;
  int rank() const { return steps.rank(); }
  int size() const { return steps.size(); }
};

namespace algo {

// The rank that receives the result, or -1 where every rank does (all_reduce, all_gather).
inline int receiver(const detail::CollArgs& a) { return detail::has_root(a.coll) ? a.root : -1; }

// Calls step(off, n) for each chunk of at most `chunk` of `count` elements, in order: one slot
// step each. A call of count 0 still takes one step (every rank takes the same steps).
template <class Step>
void each_chunk(std::size_t count, std::size_t chunk, Step&& step) {
  std::size_t off = 0;
  do {
    const std::size_t n = count - off < chunk ? count - off : chunk;
    step(off, n);
    off += n;
  } while (off < count);
}

void all_reduce_eager(Parts& p, const detail::CollArgs& a);
void all_reduce_one_step(Parts& p, const detail::CollArgs& a);
// all_reduce or reduce: every rank reduces a slice of every step.
void reduce_slices(Parts& p, const detail::CollArgs& a);
void all_reduce_cma(Parts& p, const detail::CollArgs& a);
void reduce_eager(Parts& p, const detail::CollArgs& a);
void reduce_at_root(Parts& p, const detail::CollArgs& a);
void reduce_cma(Parts& p, const detail::CollArgs& a);

// The buffer is a.recv.
void broadcast_eager(Parts& p, const detail::CollArgs& a);
void broadcast_slots(Parts& p, const detail::CollArgs& a);
void broadcast_cma(Parts& p, const detail::CollArgs& a);

// all_gather and gather.
void gather_eager(Parts& p, const detail::CollArgs& a);
void gather_slots(Parts& p, const detail::CollArgs& a);
void gather_cma(Parts& p, const detail::CollArgs& a);
// A gather or all_gather of more bytes per rank than this steps in pieces of it (gather_slots.cc).
inline constexpr std::size_t kGatherPieceBytes = std::size_t{512} << 10;

// gatherv and scatterv: every rank's count, the same on every rank; throws InvalidUsage on every
// rank where the root's counts disagree (agree_on_counts.cc).
std::vector<std::size_t> agree_on_counts(Parts& p, const detail::CollArgs& a);
void gatherv_slots(Parts& p, const detail::CollArgs& a);
void scatterv_slots(Parts& p, const detail::CollArgs& a);

void scatter_eager(Parts& p, const detail::CollArgs& a);
void scatter_slots(Parts& p, const detail::CollArgs& a);
void scatter_cma(Parts& p, const detail::CollArgs& a);

void reduce_scatter_eager(Parts& p, const detail::CollArgs& a);
void reduce_scatter_slots(Parts& p, const detail::CollArgs& a);

void all_to_all_slots(Parts& p, const detail::CollArgs& a);
void all_to_allv_slots(Parts& p, const detail::CollArgs& a);

}  // namespace algo
}  // namespace synk::shm
