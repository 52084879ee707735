// The master-driven mode's request packets (synk/distribute.h): messages whose waits notice a
// dead rank on this node, where MPI would wait for it.
#pragma once

#include <cstddef>
#include <vector>

#include "synk/distribute.h"

namespace synk::detail {

// The master sends the first `bytes` bytes of `packet` to every worker, one small message
// each (Open MPI's MPI_Ibcast took longer: docs/measurements.md#master-driven-calls), and a
// worker receives it into `packet` (of at least `bytes`). Both poll: the master spins briefly
// and throws Error(Timeout) after SYNK_TIMEOUT; a waiting worker spins, then sleeps between
// tests. Every 10 ms of waiting they check the watch and throw Error(Remote) naming a rank that
// died. On a throw the message is still pending, so `packet` is taken and never freed (MPI may
// yet use its memory).
void packet_send(const Communicator& comm, std::vector<unsigned char>& packet, std::size_t bytes,
                 const PeerWatch& watch);
void packet_receive(const Communicator& comm, std::vector<unsigned char>& packet,
                    const PeerWatch& watch);

}  // namespace synk::detail
