// reduce in one eager step: the non-roots write theirs into their entries and go on; the root
// reads them all (its own too, so that an in-place recv aliases no source).
#include "backends/shm/algorithms/reduction.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void reduce_eager(Parts& p, const detail::CollArgs& a) {
  const std::size_t bytes = a.count * size_of(a.dtype);
  p.steps.next_step(true, bytes);
  copy(p.steps.eager_out(), a.send, bytes);
  if (p.rank() != a.root) return p.steps.post();
  p.steps.sync();
  reduce_from(
      a.recv, p.size(), [&](int q) { return p.steps.eager_in(q); }, a.count, a.dtype, a.op);
}

}  // namespace synk::shm::algo
