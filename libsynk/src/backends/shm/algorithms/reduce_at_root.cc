// reduce with only the root reading: step by step the others write a chunk into their slots
// and go on (their check is lagged), up to two steps ahead; the root reduces every chunk
// straight into recv. Its own part comes from send, except in place on a root other than rank 0
// (the reduction, in rank order, may alias only its first source): then it goes through its slot
// too. Against reduce_slices, where every rank reduces a slice and the root then copies the
// others' slices out, this moves less between the caches and waits once per step instead of
// twice; it wins on 2 ranks at every size and on 3-4 up to GroupConfig::root_reduces_bytes, and
// loses on 8 or more, where the root alone reads what all the cores could
// (docs/measurements.md#one-step-or-slices-by-ranks-2026-11-28).
#include "backends/shm/algorithms/reduction.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void reduce_at_root(Parts& p, const detail::CollArgs& a) {
  const void* send = a.send;
  const int root = a.root;
  const std::size_t es = size_of(a.dtype);
  const std::size_t chunk = p.slots.slot_elems(a.dtype);
  const bool own_via_slot = send == a.recv && root != 0;
  each_chunk(a.count, chunk, [&](std::size_t off, std::size_t n) {
    p.slots.next_slot_step(n * es);
    if (p.rank() != root || own_via_slot) {
      p.slots.copy_in(p.slots.slot(p.rank()), at(send, off * es), n * es);
    }
    if (p.rank() != root) {
      p.steps.post();
    } else {
      p.steps.sync();
      auto source = [&](int q) -> const void* {
        return q == root && !own_via_slot ? at(send, off * es) : p.slots.slot(q);
      };
      reduce_from(at(a.recv, off * es), p.size(), source, n, a.dtype, a.op);
    }
  });
}

}  // namespace synk::shm::algo
