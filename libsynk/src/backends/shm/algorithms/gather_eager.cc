// all_gather (root -1) and gather in one eager step: every rank writes its block into its
// entry; in a gather only the root waits, and reads them all.
#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void gather_eager(Parts& p, const detail::CollArgs& a) {
  const int root = receiver(a);
  const std::size_t bytes = a.count * size_of(a.dtype);
  p.steps.next_step(true, bytes);
  copy(p.steps.eager_out(), a.send, bytes);
  if (root >= 0 && root != p.rank()) return p.steps.post();
  p.steps.sync();
  for (int q = 0; q < p.size(); ++q) {
    copy(at(a.recv, static_cast<std::size_t>(q) * bytes), p.steps.eager_in(q), bytes);
  }
}

}  // namespace synk::shm::algo
