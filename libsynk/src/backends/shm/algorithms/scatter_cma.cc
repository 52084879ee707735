// scatter by cross-memory attach: each rank pulls its block straight out of the root's send
// buffer with process_vm_readv, all at once, while the root copies its own. Through the slots
// the root alone would copy every block in, one step after another. Chosen from
// SYNK_SHM_CMA_BYTES per rank (1 MiB): it gained from 2 MiB per rank here, where the slot path
// leaves ranks idle (docs/shm-backend.md#cross-memory-attach-for-scatter).
#include "backends/shm/byte_offset.h"
#include "backends/shm/shm_group.h"

namespace synk::shm {

void Group::scatter_cma(const void* send, void* recv, std::size_t count, DataType t, int root) {
  const std::size_t bytes = count * size_of(t);
  open_cma(send);
  const std::size_t mine = static_cast<std::size_t>(cfg_.rank) * bytes;
  if (cfg_.rank == root) {
    copy(recv, cat(send, mine), bytes);  // nothing to do in place
  } else {
    cma_pull(root, recv, peer_send(root) + mine, bytes);
  }
  finish_cma();  // the root's buffer stays alive and unchanged until the last pull is done
}

}  // namespace synk::shm
