// MPI start-up and the node layout of a communicator (which ranks share a node).
#pragma once

#include "core/backend.h"

namespace synk::detail {

// Initializes MPI when the program has not; in that case MPI is finalized at exit.
void ensure_mpi_initialized();
bool mpi_is_finalized();
// A rank of this job was seen to die. MPI_Finalize waits for every rank and was seen to wait
// for a dead one forever (Open MPI 4.1 under mpirun --enable-recovery), so from then on the
// exit handler skips it: the process ends without it.
void note_peer_death() noexcept;

// Duplicates `comm` and finds the node layout: ranks that share memory form a node, split
// further into `simulate_nodes` fake nodes (SYNK_SIMULATE_NODES) to test multi-node paths on
// one machine. Collective over comm.
CommContext make_context(MPI_Comm comm, int simulate_nodes);
// Frees the communicators of ctx (a no-op after MPI_Finalize). Never throws.
void free_context(CommContext& ctx) noexcept;

}  // namespace synk::detail
