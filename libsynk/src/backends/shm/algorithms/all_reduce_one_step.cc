// all_reduce in one slot step: everyone copies in, then everyone reduces the whole vector from
// all slots. For vectors that fit a slot but are too small for reduce_slices' two waits.
#include "backends/shm/algorithms/reduction.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void all_reduce_one_step(Parts& p, const void* send, void* recv, std::size_t count, DataType t,
                         ReduceOp op) {
  p.slots.next_slot_step(count * size_of(t));
  p.slots.shift_slots(send);
  copy(p.slots.slot(p.rank()), send, count * size_of(t));
  p.steps.sync();
  reduce_slice(p, 0, count, 0, recv, t, op);
}

}  // namespace synk::shm::algo
