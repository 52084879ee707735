// The slot arena of a shm::Group: two sets of one slot per rank and one shared result area,
// through which large calls move their data, a slot step at a time. Data step k uses set
// k % 2, so a rank writes a set again only when every peer is done with it (step_sync.cc).
// Within a set each step places its data at an offset that walks along the slots, and each
// rank's data as far into a page as its source (slot_arena.cc says why). The arena also
// copies in and out with the stores this call chose (store_tuner.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/shm/step_channel.h"
#include "synk/types.h"

namespace synk::shm {

class SlotArena {
 public:
  // A shift is under one page, so each slot has one page more than slot_bytes.
  static constexpr std::size_t kShiftRoom = 4096;
  // Bytes between two slots: slot_bytes and the room a shift takes.
  static constexpr std::size_t slot_stride(std::size_t slot_bytes) {
    return slot_bytes + kShiftRoom;
  }
  // Bytes of the arena of `size` ranks.
  static std::size_t arena_bytes(int size, std::size_t slot_bytes) {
    return 2 * (static_cast<std::size_t>(size) + 1) * slot_stride(slot_bytes);
  }
  // The size of an L1-resident piece of a reduction (scratch()).
  static constexpr std::size_t kFusedPieceBytes = 32 * 1024;

  SlotArena(unsigned char* data, StepChannel& steps, std::size_t slot_bytes);

  // Per call: whether copies into the slots (and into the caller's buffer) stream.
  void set_stores(bool stream_in, bool stream_out);
  bool streams_in() const { return stream_; }
  bool streams_out() const { return stream_out_; }

  // The channel's next_step() for a step that puts at most `bytes` into each slot (and the
  // result area): it places them at an offset that walks through the slot from one use of the
  // set to the next, or, without `walk`, always at its start.
  void next_slot_step(std::size_t bytes, bool walk = true);
  // For a step in which every rank reads only slots their owners wrote (broadcast, the
  // gathers): this rank's data in its slot starts as far into a page as own_src (this rank's
  // source, or null if it writes none) does, and every rank reads each peer's slot at the place
  // that peer published. Every rank of the call calls it. own_dst (this rank's destination, or
  // null) is published too, for place_result.
  void shift_slots(const void* own_src, const void* own_dst = nullptr);
  // After this step's first sync, in a step that shift_slots placed: the shared result area
  // starts as far into a page as `owner`'s destination does (all_reduce: rank 0's; reduce: the
  // root's). Read once here: a later post of the step moves past the entry.
  void place_result(int owner);

  unsigned char* slot(int peer) const;  // this step's slot of `peer`, from this step's offset
  unsigned char* result() const;        // this step's shared result area, likewise
  std::size_t slot_bytes() const { return slot_bytes_; }
  std::size_t slot_elems(DataType t) const { return slot_bytes_ / size_of(t); }
  unsigned char* scratch() { return scratch_.data(); }  // kFusedPieceBytes, private to this rank

  // Copies into a slot (a rank's own, or in a scatter the root into another's): with the
  // stores this call chose. Nothing moves in place.
  void copy_in(void* dst, const void* src, std::size_t bytes) const;
  // Copies into the caller's buffer: streaming when this call's output is large.
  void copy_out(void* dst, const void* src, std::size_t bytes) const;
  // copy_in(slot, src) and copy_out(own, src) in one pass over src: src is read once, a
  // piece at a time, and the second copy of each piece reads it from L1.
  void copy_in_and_out(void* slot, void* own, const void* src, std::size_t bytes) const;

 private:
  std::size_t peer_shift(int peer, int word = 0) const;  // a peer's published place

  unsigned char* data_;
  StepChannel& steps_;
  std::size_t slot_bytes_;
  int rank_;
  int size_;
  std::size_t slot_offset_ = 0;  // where this step's data starts in every slot (next_slot_step)
  bool shifted_ = false;         // this step places data in the slots by page offset
  std::size_t own_shift_ = 0;    // and mine starts this far past slot_offset_
  std::size_t own_dst_shift_ = 0;  // where my destination starts in its page (shift_slots)
  std::size_t result_shift_ = 0;   // the result area starts this far past slot_offset_
  bool stream_ = false;      // this call's copies into the slots use non-temporal stores
  bool stream_out_ = false;  // and its copies into the caller's buffer
  std::vector<unsigned char> scratch_ = std::vector<unsigned char>(kFusedPieceBytes);
};

}  // namespace synk::shm
