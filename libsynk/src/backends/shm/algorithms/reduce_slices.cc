// all_reduce (root -1) or reduce in slices: a reduce-scatter followed by an all-gather, a slot
// step at a time. Every rank copies its chunk into its slot, except the slice it reduces itself,
// which it reduces from send; after a sync each rank reduces its slice of every slot into the
// shared result area; after a second wait every receiver copies the others' slices out. From a
// node buffer the others read their slices in place (unless this rank streams its copies:
// node_buffers.h says why); they are done with them when they post, so the step's last arrive()
// is its closing wait. How the result area is written and read follows the stores the call chose
// (docs/measurements.md#reduce_slices-the-result-area-and-the-copy-out).
#include <algorithm>

#include "backends/shm/algorithms/reduction.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

namespace {

// One step: a chunk of n elements starting at element `off`.
void reduce_chunk(Parts& p, const void* send, void* recv, std::size_t off, std::size_t n,
                  DataType t, ReduceOp op, int root) {
  const std::size_t es = size_of(t);
  const bool receives = root < 0 || root == p.rank();
  SlotArena& slots = p.slots;
  slots.next_slot_step(n * es);
  slots.shift_slots(at(send, off * es), receives ? at(recv, off * es) : nullptr);
  // The others read only their slices of my slot; my own slice I reduce from send directly.
  std::size_t lo, hi;
  slice(p.rank(), p.size(), n, es, &lo, &hi);
  if (!p.node.offer(at(send, off * es), n * es)) {
    slots.copy_in(slots.slot(p.rank()), at(send, off * es), lo * es);
    slots.copy_in(slots.slot(p.rank()) + hi * es, at(send, (off + hi) * es), (n - hi) * es);
  }
  p.steps.sync();
  slots.place_result(root < 0 ? 0 : root);
  // The root of a reduce (out of place) reduces its slice straight into recv: only the others'
  // slices go through the result area and get copied out.
  const bool direct = root == p.rank() && send != recv;
  // Streamed slots: the result area is streamed from an L1 scratch too.
  const bool scratch = slots.streams_in() && !direct;
  // Ordinary stores into recv: each piece of my slice is copied out while still in L1.
  const bool fused = receives && !direct && !slots.streams_out();
  unsigned char* dst = direct ? at(recv, off * es) : slots.result();  // element 0 of this chunk
  const std::size_t piece =
      scratch || fused ? std::max<std::size_t>(1, SlotArena::kFusedPieceBytes / es) : hi - lo;
  for (std::size_t a = lo; a < hi; a += piece) {
    const std::size_t b = std::min(hi, a + piece);
    if (scratch) {
      reduce_slice(p, a, b, 0, slots.scratch(), t, op, at(send, off * es));
      slots.copy_in(slots.result() + a * es, slots.scratch(), (b - a) * es);
      if (receives) slots.copy_out(at(recv, (off + a) * es), slots.scratch(), (b - a) * es);
      continue;
    }
    reduce_slice(p, a, b, 0, dst + a * es, t, op, at(send, off * es));
    if (fused) slots.copy_out(at(recv, (off + a) * es), slots.result() + a * es, (b - a) * es);
  }
  p.steps.post();
  if (receives && !direct && !fused && !scratch) {
    slots.copy_out(at(recv, (off + lo) * es), slots.result() + lo * es, (hi - lo) * es);
  }
  p.steps.arrive();
  if (receives) {
    slots.copy_out(at(recv, off * es), slots.result(), lo * es);
    slots.copy_out(at(recv, (off + hi) * es), slots.result() + hi * es, (n - hi) * es);
  }
}

}  // namespace

void reduce_slices(Parts& p, const detail::CollArgs& a) {
  const int root = receiver(a);
  const std::size_t chunk = p.slots.slot_elems(a.dtype);
  each_chunk(a.count, chunk, [&](std::size_t off, std::size_t n) {
    reduce_chunk(p, a.send, a.recv, off, n, a.dtype, a.op, root);
  });
}

}  // namespace synk::shm::algo
