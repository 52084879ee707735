// Node buffers read in place (synk/node_buffer.h): memory every rank has mapped, rank r's part
// at base + r * stride. In a slot step of all_gather or a large all_reduce or reduce, a rank
// whose source of this step lies in its part of a region offers it instead of copying it into
// its slot: the step's post publishes where (two of the step's words, step_channel.h; 0 when
// nothing is offered), and each reader takes that rank's data from the region, after the step's
// check of its entry, where it would have taken it from the slot. A rank whose data was read in
// place must not return before its readers are done: those calls end with one more sync
// (algorithms/gather_slots.cc, reduce_slices.cc).
//
// A call that streams its copies into the slots offers nothing. The store tuner streams where
// the readers do not share this rank's last-level cache and streaming measured faster; a reader
// there takes lines this rank just wrote across the fabric, and reading in place lost to
// streamed slots (docs/measurements.md#-r-1-node-buffers). So the tuner's timing of its two
// ways picks between reading in place and streaming.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "backends/shm/slot_arena.h"
#include "backends/shm/step_channel.h"

namespace synk::shm {

class NodeBuffers {
 public:
  NodeBuffers(StepChannel& steps, const SlotArena& slots) : steps_(steps), slots_(slots) {}

  // Every rank adds the same regions in the same order (the allocation is collective). The
  // group keeps the mapping (`keep`) alive while any rank may still offer its part of it: a
  // peer reads that part through this rank's mapping. Returns the region's index.
  int add_region(unsigned char* base, std::size_t stride, std::size_t bytes,
                 std::shared_ptr<void> keep);
  // Per region still mapped, in the order of their indices, 1 where this rank holds no
  // NodeBuffer of it any more (only the group's `keep`). Every rank has the same ones mapped.
  std::vector<std::uint8_t> dropped_here() const;
  // Unmaps and forgets the regions marked 1: dropped on every rank (the MIN of each rank's
  // dropped_here), so that no rank can offer a part of them again. Indices are not reused.
  void release(const std::vector<std::uint8_t>& dropped_everywhere);
  // In a slot step, before its post: true if src (`bytes` of it) is offered in this step.
  bool offer(const void* src, std::size_t bytes);
  // After the step's wait: peer's offered data of this step, or null.
  const unsigned char* peer_region(int peer) const;

 private:
  struct Region {
    unsigned char* base;
    std::size_t stride;
    std::size_t bytes;
    std::shared_ptr<void> keep;
  };
  StepChannel& steps_;
  const SlotArena& slots_;
  std::map<std::size_t, Region> regions_;  // the mapped ones, by index
  std::size_t next_index_ = 0;
};

}  // namespace synk::shm
