// reduce in one eager step: the non-roots write theirs into their entries and go on; the root
// reads them all (its own too, so that an in-place recv aliases no source).
#include "backends/shm/algorithms/reduction.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void reduce_eager(Parts& p, const void* send, void* recv, std::size_t count, DataType t,
                  ReduceOp op, int root) {
  const std::size_t bytes = count * size_of(t);
  p.steps.next_step(true, bytes);
  copy(p.steps.eager_out(), send, bytes);
  if (p.rank() != root) return p.steps.post();
  p.steps.sync();
  reduce_from(recv, p.size(), [&](int q) { return p.steps.eager_in(q); }, count, t, op);
}

}  // namespace synk::shm::algo
