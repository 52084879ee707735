// scatter in one eager step, in the root's entry: it writes every block and goes on (as
// broadcast's root does); each other rank waits for the root alone and takes its block.
#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void scatter_eager(Parts& p, const detail::CollArgs& a) {
  const void* send = a.send;
  void* recv = a.recv;
  const int root = a.root;
  const std::size_t block = a.count * size_of(a.dtype);
  const std::size_t all = block * static_cast<std::size_t>(p.size());
  p.steps.next_step(true, all);
  if (p.rank() == root) {
    copy(p.steps.eager_out(), send, all);
    p.steps.post();
    copy(recv, at(send, static_cast<std::size_t>(root) * block), block);
  } else {
    p.steps.sync_with(root);
    copy(recv, p.steps.eager_in(root) + static_cast<std::size_t>(p.rank()) * block, block);
  }
}

}  // namespace synk::shm::algo
