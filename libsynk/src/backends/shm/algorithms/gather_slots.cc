// all_gather (root -1) and gather through the slots: every rank that others read from copies a
// chunk into its slot and posts; a receiver copies its own block from send to recv (in
// all_gather in the same pass as its slot, in a gather while the others arrive), then every
// other rank's block out of their slots. The root of a gather copies nothing in: it does the
// copying-out alone, so every byte it need not move counts. Above kGatherPieceBytes per rank the
// steps go in pieces of it at the slots' start, which keeps less of the last-level cache busy
// (docs/measurements.md#all_gather-and-gather-through-the-slots).
#include <algorithm>

#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

namespace {

// One step: elements [off, off + n) of every rank's block. Returns whether some rank's block
// came straight from its node buffer (only all_gather offers).
bool gather_chunk(Parts& p, const void* send, void* recv, std::size_t count, std::size_t off,
                  std::size_t n, DataType t, int root, bool walk) {
  const std::size_t es = size_of(t);
  const int me = p.rank();
  const bool receives = root < 0 || root == me;
  SlotArena& slots = p.slots;
  slots.next_slot_step(n * es, walk);
  slots.shift_slots(me == root ? nullptr : at(send, off * es));  // a gather's root writes none
  unsigned char* own =
      receives ? at(recv, (static_cast<std::size_t>(me) * count + off) * es) : nullptr;
  bool read_in_place = false;
  if (root < 0) {
    if (p.node.offer(at(send, off * es), n * es)) {
      read_in_place = true;
      slots.copy_out(own, at(send, off * es), n * es);
    } else {
      slots.copy_in_and_out(slots.slot(me), own, at(send, off * es), n * es);
    }
    p.steps.post();
  } else {
    if (root != me) slots.copy_in(slots.slot(me), at(send, off * es), n * es);
    p.steps.post();
    if (receives) slots.copy_out(own, at(send, off * es), n * es);
  }
  p.steps.arrive();
  if (!receives) return read_in_place;
  for (int q = 0; q < p.size(); ++q) {
    if (q == me) continue;
    const unsigned char* offered = p.node.peer_region(q);
    read_in_place = read_in_place || offered;
    slots.copy_out(at(recv, (static_cast<std::size_t>(q) * count + off) * es),
                   offered ? offered : slots.slot(q), n * es);
  }
  return read_in_place;
}

}  // namespace

void gather_slots(Parts& p, const detail::CollArgs& a) {
  const std::size_t count = a.count;
  const DataType t = a.dtype;
  const std::size_t es = size_of(t);
  const bool pieces = count * es > kGatherPieceBytes;
  const std::size_t chunk =
      pieces ? std::min(p.slots.slot_elems(t), kGatherPieceBytes / es) : p.slots.slot_elems(t);
  bool read_in_place = false;
  each_chunk(count, chunk, [&](std::size_t off, std::size_t n) {
    read_in_place =
        gather_chunk(p, a.send, a.recv, count, off, n, t, receiver(a), !pieces) || read_in_place;
  });
  // Every rank saw the same offers, so all take this last step or none: after it every reader
  // is done with the node buffers read in place.
  if (read_in_place) p.steps.sync();
}

}  // namespace synk::shm::algo
