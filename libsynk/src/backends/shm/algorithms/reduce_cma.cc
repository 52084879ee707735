// reduce by cross-memory attach: the root pulls every peer's send buffer, a piece at a time, and
// reduces it into recv (as reduce_at_root does through the slots); the others wait for it, since
// their buffers must stay as they are until then. Chosen by measurement (algo_chooser.h).
#include "backends/shm/algorithms/reduction.h"

namespace synk::shm::algo {

void reduce_cma(Parts& p, const void* send, void* recv, std::size_t count, DataType t,
                ReduceOp op, int root) {
  p.cma.open(send);
  if (p.rank() == root) reduce_pulled(p, send, 0, count, recv, t, op);
  p.cma.finish();
}

}  // namespace synk::shm::algo
