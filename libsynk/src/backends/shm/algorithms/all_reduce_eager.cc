// all_reduce in one eager step: every rank writes its vector into its entry (the data share a
// line with the step) and reduces every rank's.
#include "backends/shm/algorithms/reduction.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void all_reduce_eager(Parts& p, const detail::CollArgs& a) {
  const std::size_t bytes = a.count * size_of(a.dtype);
  p.steps.next_step(true, bytes);
  copy(p.steps.eager_out(), a.send, bytes);
  p.steps.sync();
  reduce_from(
      a.recv, p.size(), [&](int q) { return p.steps.eager_in(q); }, a.count, a.dtype, a.op);
}

}  // namespace synk::shm::algo
