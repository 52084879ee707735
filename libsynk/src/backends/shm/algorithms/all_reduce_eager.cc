// all_reduce in one eager step: every rank writes its vector into its entry (the data share a
// line with the step) and reduces every rank's.
#include "backends/shm/algorithms/reduction.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void all_reduce_eager(Parts& p, const void* send, void* recv, std::size_t count, DataType t,
                      ReduceOp op) {
  const std::size_t bytes = count * size_of(t);
  p.steps.next_step(true, bytes);
  copy(p.steps.eager_out(), send, bytes);
  p.steps.sync();
  reduce_from(recv, p.size(), [&](int q) { return p.steps.eager_in(q); }, count, t, op);
}

}  // namespace synk::shm::algo
