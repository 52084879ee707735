// broadcast through the slots: step by step the root copies a chunk into its slot and goes on
// (the next step, or call, waits for the readers); each other rank waits for the root alone and
// copies the chunk out. The root copies even from a node buffer: read in place, it would have to
// wait for its readers (docs/measurements.md#broadcast-the-root-copies-even-from-a-node-buffer).
#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void broadcast_slots(Parts& p, const detail::CollArgs& a) {
  void* buf = a.recv;
  const int root = a.root;
  const std::size_t es = size_of(a.dtype);
  const std::size_t chunk = p.slots.slot_elems(a.dtype);
  each_chunk(a.count, chunk, [&](std::size_t off, std::size_t n) {
    p.slots.next_slot_step(n * es);
    p.slots.shift_slots(p.rank() == root ? at(buf, off * es) : nullptr);
    if (p.rank() == root) {
      p.slots.copy_in(p.slots.slot(root), at(buf, off * es), n * es);
      p.steps.post();
    } else {
      p.steps.sync_with(root);
      p.slots.copy_out(at(buf, off * es), p.slots.slot(root), n * es);
    }
  });
}

}  // namespace synk::shm::algo
