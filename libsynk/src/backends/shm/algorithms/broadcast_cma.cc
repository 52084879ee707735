// broadcast by cross-memory attach: every other rank pulls the whole buffer straight out of the
// root's with process_vm_readv, one copy instead of the slots' two (into the root's slot, out
// of it). The root waits for the last pull (its buffer must stay as it is until then), where
// through the slots it goes on at once. Chosen by measurement (algo_chooser.h): it wins where
// the ranks share a large last-level cache.
#include "backends/shm/algorithms/algorithms.h"

namespace synk::shm::algo {

void broadcast_cma(Parts& p, const detail::CollArgs& a) {
  p.cma.open(a.recv);
  if (p.rank() != a.root) {
    p.cma.pull(a.root, a.recv, p.cma.peer_buffer(a.root), a.count * size_of(a.dtype));
  }
  p.cma.finish();
}

}  // namespace synk::shm::algo
