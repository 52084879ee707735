// The slot arena: where each step's data sit in the slots, and the copies in and out.
#include "backends/shm/slot_arena.h"

#include <algorithm>
#include <cstdint>

#include "backends/shm/byte_offset.h"
#include "backends/shm/stream_copy.h"
#include "backends/shm/vector_copy.h"

namespace synk::shm {

SlotArena::SlotArena(unsigned char* data, StepChannel& steps, std::size_t slot_bytes)
    : data_(data), steps_(steps), slot_bytes_(slot_bytes), rank_(steps.rank()),
      size_(steps.size()) {}

void SlotArena::set_stores(bool stream_in, bool stream_out) {
  stream_ = stream_in;
  stream_out_ = stream_out;
  steps_.fence_posts(stream_in);
}

// Why the offset walks. A rank that rewrites lines its reader still holds in its cache (it read
// them one use of the set ago) has to take each line back from that cache first; placing each
// use of a set further along the slot leaves 2 MiB per rank (both sets) between two writes of the
// same line, more than a core's L2 here, so the reader has mostly let them go by then
// (docs/measurements.md#walking-offsets). Every rank computes the same offset from the step's
// number and the call's size; a rank whose call differs (a mismatch) writes its own slot at its
// own offset and is caught before anyone reads it. Reuse stays safe: a region of a set was last
// written at an earlier step of that set, which every peer is done with (the top of
// step_sync.cc). Large gathers and all_gathers keep to the start (gather_slots.cc).
void SlotArena::next_slot_step(std::size_t bytes, bool walk) {
  steps_.next_step();
  steps_.mark_slot_step();
  slot_offset_ = 0;
  shifted_ = false;
  own_shift_ = 0;
  own_dst_shift_ = 0;
  result_shift_ = 0;
  if (!walk) return;  // at the slots' start
  constexpr std::size_t kAlign = 4096;
  const std::size_t stride = (std::max<std::size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  // Up to one page a rank the walk made calls slower, not faster
  // (docs/measurements.md#walking-offsets).
  const std::size_t places =
      stride > kAlign && stride < slot_bytes_ ? slot_bytes_ / stride : 1;
  slot_offset_ = static_cast<std::size_t>((steps_.data_steps() >> 1) % places) * stride;
}

// Why data sits as far into a page as its source: memcpy between the caller's buffer and a slot
// ran much more slowly when the two start at different places in their pages
// (docs/measurements.md#data-as-far-into-a-page-as-its-source). The writer places its data at its
// source's page offset and publishes it in its step words; a reader whose buffer sits at the same
// offset, as in most programs running the same code on every rank, then copies between equal
// offsets too. Only where each slot is written by its owner: scatter's root writes the others'
// slots. all_reduce places each rank's slot by its send buffer, and its result area, which every
// rank writes a slice of and reads, where rank 0's destination starts (the root's, for reduce),
// as rank 0 publishes: one offset for all, the right one when every rank's buffers sit alike.
// reduce_at_root and reduce_scatter measured the same at every offset (their reads feed a
// reduction, not memcpy) and are left at the walk's offset.
void SlotArena::shift_slots(const void* own_src, const void* own_dst) {
  shifted_ = true;
  own_shift_ = own_src ? reinterpret_cast<std::uintptr_t>(own_src) % kShiftRoom : 0;
  own_dst_shift_ = own_dst ? reinterpret_cast<std::uintptr_t>(own_dst) % kShiftRoom : 0;
  steps_.set_step_word(StepChannel::kSrcShift, own_shift_);
  steps_.set_step_word(StepChannel::kDstShift, own_dst_shift_);
}

std::size_t SlotArena::peer_shift(int peer, int word) const {
  // Never outside the slot, whatever is there.
  return static_cast<std::size_t>(steps_.peer_step_word(peer, word) % kShiftRoom);
}

void SlotArena::place_result(int owner) {
  result_shift_ = owner == rank_ ? own_dst_shift_ : peer_shift(owner, StepChannel::kDstShift);
}

unsigned char* SlotArena::slot(int peer) const {
  const std::size_t set = steps_.data_steps() & 1;
  const std::size_t n = static_cast<std::size_t>(size_);
  std::size_t shift = 0;
  if (peer == size_) {
    shift = result_shift_;
  } else if (shifted_) {
    shift = peer == rank_ ? own_shift_ : peer_shift(peer);
  }
  return data_ + (set * (n + 1) + static_cast<std::size_t>(peer)) * slot_stride(slot_bytes_) +
         slot_offset_ + shift;
}

unsigned char* SlotArena::result() const { return slot(size_); }

namespace {

// Streaming as the call chose, else vector_copy (vector_copy.h says why not memcpy).
void copy_with(bool streaming, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (streaming) {
    stream_copy(dst, src, bytes);
  } else {
    vector_copy(dst, src, bytes);
  }
}

}  // namespace

void SlotArena::copy_in(void* dst, const void* src, std::size_t bytes) const {
  copy_with(stream_, dst, src, bytes);
}

void SlotArena::copy_out(void* dst, const void* src, std::size_t bytes) const {
  copy_with(stream_out_, dst, src, bytes);
}

void SlotArena::copy_in_and_out(void* slot, void* own, const void* src, std::size_t bytes) const {
  constexpr std::size_t kPiece = 8 * 1024;  // well inside L1
  for (std::size_t o = 0; o < bytes; o += kPiece) {
    const std::size_t n = std::min(kPiece, bytes - o);
    copy_in(at(slot, o), at(src, o), n);
    copy_out(at(own, o), at(src, o), n);
  }
}

}  // namespace synk::shm
