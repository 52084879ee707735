// all_gather (root -1) and gather in one eager step: every rank writes its block into its
// entry; in a gather only the root waits, and reads them all.
#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void gather_eager(Parts& p, const void* send, void* recv, std::size_t count, DataType t,
                  int root) {
  const std::size_t bytes = count * size_of(t);
  p.steps.next_step(true, bytes);
  copy(p.steps.eager_out(), send, bytes);
  if (root >= 0 && root != p.rank()) return p.steps.post();
  p.steps.sync();
  for (int q = 0; q < p.size(); ++q) {
    copy(at(recv, static_cast<std::size_t>(q) * bytes), p.steps.eager_in(q), bytes);
  }
}

}  // namespace synk::shm::algo
