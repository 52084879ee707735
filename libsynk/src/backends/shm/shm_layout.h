// The layout of a Group's control blocks in the segment, shared by shm_group.cc (set-up, the
// per-rank words) and shm_sync.cc (steps, checks, waits). Only the owner writes its block.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "backends/shm/shm_group.h"

namespace synk::shm::layout {

constexpr std::size_t kLine = 128;  // two cache lines: no false sharing with the prefetcher
constexpr std::size_t kHeaderBytes = 4096;
constexpr std::size_t kErrorText = 240;

// One step of one rank: the call it belongs to and, for eager steps, the data (for slot steps
// placed by page offset, the first 8 bytes say where: Group::shift_slots); `step` is
// stored last (release), so a reader that sees it sees the rest. Call, step and the first 32
// bytes of data share a cache line: a small broadcast costs the reader one miss.
struct alignas(64) Entry {
  std::atomic<std::uint64_t> step;
  Group::Call call;
  unsigned char data[Group::kEagerBytes];
};
static_assert(offsetof(Entry, data) == 32);

// A step's call again, without the data: two steps to a cache line, for the ranks that check
// steps they did not read. The root of a small broadcast checks its readers' calls 32 steps
// at a time; from their entries, each a line of its own that they had just written, that was
// a miss a step (shm_sync.cc, catch_up, says what it cost). `step` is stored after the
// entry's (release).
struct StepCall {
  std::atomic<std::uint64_t> step;
  Group::Call call;
};
static_assert(sizeof(StepCall) == 32);

struct alignas(kLine) RankBlock {
  // Finished reading, and checked against every peer, every step up to this one. (A rank's
  // last step posted is in its entries: Entry::step.)
  alignas(kLine) std::atomic<std::uint64_t> done;
  alignas(kLine) std::atomic<std::int64_t> pid;
  alignas(kLine) std::atomic<std::int64_t> status;  // gatherv: the root's verdict on the counts
  // This call's send buffer in the owner's address space, for cross-memory attach (shm_cma.cc),
  // and the owner's verdict on it (the probe, then each call's copy result).
  alignas(kLine) std::atomic<std::uint64_t> send_addr;
  std::atomic<std::int64_t> cma_status;
  // The CPUs the owner may run on (its affinity mask), once cpus_known is 1 (2: not known).
  alignas(kLine) std::atomic<std::uint32_t> cpus_known;
  cpu_set_t cpus;
  alignas(kLine) StepCall calls[Group::kEagerDepth];  // by step % kEagerDepth
  alignas(kLine) Entry entries[Group::kEagerDepth];  // by step % kEagerDepth
  char errors[Group::kEagerDepth][kErrorText];       // a rejected call's text, by step
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "cross-process atomics need lock-free 64-bit atomics");

inline RankBlock& block_at(unsigned char* blocks, int r) {
  return reinterpret_cast<RankBlock*>(blocks)[r];
}

inline Entry& entry_of(unsigned char* blocks, int r, std::uint64_t step) {
  return block_at(blocks, r).entries[step % Group::kEagerDepth];
}

inline StepCall& call_of(unsigned char* blocks, int r, std::uint64_t step) {
  return block_at(blocks, r).calls[step % Group::kEagerDepth];
}

}  // namespace synk::shm::layout
