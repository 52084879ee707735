// reduce by cross-memory attach: the root pulls every peer's send buffer, a piece at a time, and
// reduces it into recv (as reduce_at_root does through the slots); the others wait for it, since
// their buffers must stay as they are until then. Chosen by measurement (algo_chooser.h).
#include "backends/shm/algorithms/reduction.h"

namespace synk::shm::algo {

void reduce_cma(Parts& p, const detail::CollArgs& a) {
  p.cma.open(a.send);
  if (p.rank() == a.root) reduce_pulled(p, a.send, 0, a.count, a.recv, a.dtype, a.op);
  p.cma.finish();
}

}  // namespace synk::shm::algo
