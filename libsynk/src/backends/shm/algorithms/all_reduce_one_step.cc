// all_reduce in one slot step: everyone copies in, then everyone reduces the whole vector from
// all slots. For vectors that fit a slot but are too small for reduce_slices' two waits.
#include "backends/shm/algorithms/reduction.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void all_reduce_one_step(Parts& p, const detail::CollArgs& a) {
  const std::size_t bytes = a.count * size_of(a.dtype);
  p.slots.next_slot_step(bytes);
  p.slots.shift_slots(a.send);
  copy(p.slots.slot(p.rank()), a.send, bytes);
  p.steps.sync();
  reduce_slice(p, 0, a.count, 0, a.recv, a.dtype, a.op);
}

}  // namespace synk::shm::algo
