// broadcast in one eager step: the root writes into its entry and goes on without waiting;
// each other rank waits for the root alone.
#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void broadcast_eager(Parts& p, const detail::CollArgs& a) {
  void* buf = a.recv;
  const int root = a.root;
  const std::size_t bytes = a.count * size_of(a.dtype);
  p.steps.next_step(true, bytes);
  if (p.rank() == root) {
    copy(p.steps.eager_out(), buf, bytes);
    p.steps.post();
  } else {
    p.steps.sync_with(root);
    copy(buf, p.steps.eager_in(root), bytes);
  }
}

}  // namespace synk::shm::algo
