// scatter by cross-memory attach: each rank pulls its block straight out of the root's send
// buffer with process_vm_readv, all at once, while the root copies its own. Through the slots
// the root alone would copy every block in, one step after another. Chosen from
// SYNK_SHM_CMA_BYTES per rank (1 MiB): it gained from 2 MiB per rank here, where the slot path
// leaves ranks idle (docs/shm-backend.md#cross-memory-attach-for-scatter).
#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void scatter_cma(Parts& p, const detail::CollArgs& a) {
  const void* send = a.send;
  void* recv = a.recv;
  const int root = a.root;
  const std::size_t bytes = a.count * size_of(a.dtype);
  p.cma.open(send);
  const std::size_t mine = static_cast<std::size_t>(p.rank()) * bytes;
  if (p.rank() == root) {
    copy(recv, at(send, mine), bytes);  // nothing to do in place
  } else {
    p.cma.pull(root, recv, p.cma.peer_buffer(root) + mine, bytes);
  }
  p.cma.finish();  // the root's buffer stays alive and unchanged until the last pull is done
}

}  // namespace synk::shm::algo
