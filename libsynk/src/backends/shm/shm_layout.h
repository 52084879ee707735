// The layout of a Group's control blocks in the segment, which the step channel
// (step_channel.h) reads and writes. Only the owner writes its block.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace synk::shm {

// Steps a rank that only writes may run ahead of the others (entries and StepCalls per rank),
// and the data an entry holds: an all_reduce of up to this many bytes travels in the entries
// instead of the slots (the other collectives' limits are in shm_collectives.cc).
inline constexpr std::uint64_t kEagerDepth = 64;
inline constexpr std::size_t kEagerBytes = 2048;
// An eager step that puts at most this much into each rank's part is tiny: its data travel
// with the step's compact call (StepCall below), two steps to a cache line.
inline constexpr std::size_t kTinyBytes = 8;

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

}  // namespace synk::shm

namespace synk::shm::layout {

constexpr std::size_t kLine = 128;  // two cache lines: no false sharing with the prefetcher
constexpr std::size_t kHeaderBytes = 4096;
constexpr std::size_t kErrorText = 240;

// One step of one rank: the call it belongs to and, for eager steps that are not tiny, the
// data (for slot steps placed by page offset, the first 8 bytes say where:
// SlotArena::shift_slots); `step` is stored last (release), so a reader that sees it sees the
// rest. Call, step and the first 32 bytes of data share a cache line: a small broadcast costs
// the reader one miss (a tiny one half of one: StepCall below).
struct alignas(64) Entry {
  std::atomic<std::uint64_t> step;
  Call call;
  unsigned char data[kEagerBytes];
};
static_assert(offsetof(Entry, data) == 32);

// A step's call once more, in 32 bytes, two steps to a cache line: what a rank compares for
// the steps it did not read, and for tiny steps (up to kTinyBytes of data in each
// rank's part) also the data, which then travel here instead of in the entries.
//
// Why. The root of a small broadcast checks its readers' calls 32 steps at a time: in their
// entries, each a line of its own that they had just written, that was a miss a step. And a
// reader of a broadcast of 8 bytes took the root's entry line from the root's cache once a
// call, where Open MPI's fast boxes carry two such messages in a line (step_sync.cc, catch_up
// and posted_word, say what each cost).
//
// `count` is kCountTooBig where the call's count does not fit (then the entries are compared),
// and `number` is the call's number modulo 2^32 (the ranks' numbers at one step differ by a
// few calls at most: the first step where they differ is found). `step` is stored last
// (release), after the entry's.
struct StepCall {
  static constexpr std::uint32_t kCountTooBig = ~std::uint32_t{0};
  std::atomic<std::uint64_t> step;
  std::uint32_t number;
  std::uint32_t count;
  std::int32_t root;
  std::int8_t coll, dtype, op, error_code;
  unsigned char data[kTinyBytes];
};
static_assert(sizeof(StepCall) == 32);

// RankBlock::closed: 0 while the owner still makes calls.
inline constexpr std::uint32_t kClosed = 1;
inline constexpr std::uint32_t kClosedAfterFailure = 2;

struct alignas(kLine) RankBlock {
  // Finished reading, and checked against every peer, every step up to this one. (A rank's
  // last step posted is in its entries: Entry::step.)
  alignas(kLine) std::atomic<std::uint64_t> done;
  alignas(kLine) std::atomic<std::int64_t> pid;
  std::atomic<std::uint64_t> pid_namespace;  // detail::pid_namespace_id(), stored before pid
  // Bumped by the owner as work outside the group moves on (a hier leader's chunks between the
  // nodes): a peer that waits for it past SYNK_TIMEOUT sees it alive and busy, and waits on.
  std::atomic<std::uint64_t> progress;
  // 1 while the owner works outside the group within its call (a hier rank's step between the
  // nodes): a peer that times out waiting for it says so, instead of "has not reached this call".
  std::atomic<std::uint32_t> outside;
  // Set once the owner makes no more calls in this group (it closed it, or finalized MPI): a
  // peer waiting for a step the owner never posted fails at once, not after SYNK_TIMEOUT.
  // kClosedAfterFailure where a call of the owner's had failed first (a timeout, a lost peer).
  std::atomic<std::uint32_t> closed;
  alignas(kLine) std::atomic<std::int64_t> status;  // gatherv: the root's verdict on the counts
  // This call's send buffer in the owner's address space, for cross-memory attach (cma_pull.cc),
  // and the owner's verdict on it (the probe, then each call's copy result).
  alignas(kLine) std::atomic<std::uint64_t> send_addr;
  std::atomic<std::uint64_t> recv_addr;  // a second buffer, for calls that read two
  std::atomic<std::int64_t> cma_status;
  // The CPUs the owner may run on (its affinity mask), once cpus_known is 1 (2: not known).
  alignas(kLine) std::atomic<std::uint32_t> cpus_known;
  cpu_set_t cpus;
  alignas(kLine) StepCall calls[kEagerDepth];  // by step % kEagerDepth
  alignas(kLine) Entry entries[kEagerDepth];  // by step % kEagerDepth
  char errors[kEagerDepth][kErrorText];       // a rejected call's text, by step
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "cross-process atomics need lock-free 64-bit atomics");

inline RankBlock& block_at(unsigned char* blocks, int r) {
  return reinterpret_cast<RankBlock*>(blocks)[r];
}

inline Entry& entry_of(unsigned char* blocks, int r, std::uint64_t step) {
  return block_at(blocks, r).entries[step % kEagerDepth];
}

inline StepCall& call_of(unsigned char* blocks, int r, std::uint64_t step) {
  return block_at(blocks, r).calls[step % kEagerDepth];
}

}  // namespace synk::shm::layout
