// reduce_scatter in one eager step: every rank writes all of send into its entry, and reduces
// its own block of every rank's.
#include "backends/shm/algorithms/reduction.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void reduce_scatter_eager(Parts& p, const detail::CollArgs& a) {
  const std::size_t block = a.count * size_of(a.dtype);
  const std::size_t all = block * static_cast<std::size_t>(p.size());
  p.steps.next_step(true, all);
  copy(p.steps.eager_out(), a.send, all);
  p.steps.sync();
  const std::size_t mine = static_cast<std::size_t>(p.rank()) * block;
  reduce_from(
      a.recv, p.size(), [&](int q) { return p.steps.eager_in(q) + mine; }, a.count, a.dtype, a.op);
}

}  // namespace synk::shm::algo
