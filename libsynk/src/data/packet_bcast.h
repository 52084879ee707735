// The master-driven mode's request packets (synk/distribute.h): a broadcast that notices a dead
// rank on this node, where MPI would wait for it.
#pragma once

#include <cstddef>
#include <vector>

#include "synk/distribute.h"

namespace synk::detail {

// Broadcasts the first `bytes` bytes of `packet` from rank 0 (MPI_Ibcast) and polls it: spins
// briefly, then sleeps between tests. Every 10 ms of waiting it checks the watch and throws
// Error(Remote) naming a rank that died; with `deadline` (the master) it also throws
// Error(Timeout) after SYNK_TIMEOUT. On a throw the broadcast is still pending, so `packet` is
// taken and never freed (MPI may yet use its memory).
void packet_bcast(const Communicator& comm, std::vector<unsigned char>& packet, std::size_t bytes,
                  const PeerWatch& watch, bool deadline);

}  // namespace synk::detail
