// scatter through the slots: step by step the root copies a chunk of every other rank's block
// into that rank's slot; after a sync each rank copies its chunk out. The root's own block goes
// straight to recv (nothing moves in place, where they are one).
#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void scatter_slots(Parts& p, const detail::CollArgs& a) {
  const void* send = a.send;
  const std::size_t count = a.count;
  const int root = a.root;
  const std::size_t es = size_of(a.dtype);
  const std::size_t chunk = p.slots.slot_elems(a.dtype);
  each_chunk(count, chunk, [&](std::size_t off, std::size_t n) {
    p.slots.next_slot_step(n * es);
    if (p.rank() == root) {
      for (int q = 0; q < p.size(); ++q) {
        if (q == root) continue;
        p.slots.copy_in(p.slots.slot(q),
                        at(send, (static_cast<std::size_t>(q) * count + off) * es), n * es);
      }
    }
    p.steps.sync();
    const void* src = p.rank() == root
                          ? at(send, (static_cast<std::size_t>(root) * count + off) * es)
                          : p.slots.slot(p.rank());
    p.slots.copy_out(at(a.recv, off * es), src, n * es);
  });
}

}  // namespace synk::shm::algo
