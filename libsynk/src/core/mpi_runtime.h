// MPI start-up and the node layout of a communicator (which ranks share a node).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"

namespace synk::detail {

// Initializes MPI when the program has not (asking for MPI_THREAD_MULTIPLE, so that calls can
// run on a progress thread, unless SYNK_MPI_THREADS=serialized); in that case MPI is finalized
// at exit.
void ensure_mpi_initialized();
bool mpi_is_finalized();
// Whether MPI lets two threads make MPI calls at once (MPI_THREAD_MULTIPLE). A program that
// initialized MPI itself with less (Open MPI's MPI_Init gives MPI_THREAD_SINGLE) keeps every
// MPI call of synk's on the thread that made the synk call.
bool mpi_allows_threads();
// A rank of this job was seen to die, or did not answer within SYNK_TIMEOUT (stopped, or stuck
// in a loop of its own). MPI_Finalize waits for every rank: it was seen to wait forever for a
// dead one (Open MPI 4.1 under mpirun --enable-recovery) and for a stopped one (SIGSTOP, under
// plain mpirun). So from then on the exit handler skips it, and the process ends without it:
// mpirun then sees a rank leave without finalizing and ends the whole job, the stuck rank too.
void note_peer_lost() noexcept;
bool peer_was_lost() noexcept;  // note_peer_lost() was called (for tests)

// Duplicates `comm` and finds the node layout: ranks that share memory form a node, split
// further into `simulate_nodes` fake nodes (SYNK_SIMULATE_NODES) to test multi-node paths on
// one machine. Collective over comm.
CommContext make_context(MPI_Comm comm, int simulate_nodes);
// The same ranks and layout on duplicates of ctx's communicators: the calls of a communicator
// run on these, so that a progress thread's MPI calls never interleave with the ones synk makes
// on the caller's thread (alloc, split, Data) on the communicators of ctx. Collective over
// ctx.comm.
CommContext duplicate_context(const CommContext& ctx);

// This process's rank in MPI_COMM_WORLD (the job's rank, as mpirun names it): from the first
// communicator made, or from the launcher's environment before; -1 where neither says.
int job_rank_of_process();
// The rank in `other` of each rank of `comm` (MPI_UNDEFINED where it is not in `other`).
std::vector<int> ranks_in(MPI_Comm comm, MPI_Comm other);

// Frees the communicators of ctx (a no-op after MPI_Finalize). Never throws.
void free_context(CommContext& ctx) noexcept;

}  // namespace synk::detail
