// The ranks of a communicator agree on their SYNK_* settings before it starts.
#pragma once

#include <mpi.h>

#include <string>

namespace synk::detail {

// Collective over comm, first in every Communicator's start. Every rank reads all its settings
// (core, shm, mpi, KeyValue, device): a rank whose variable is malformed throws its own
// InvalidArgument and the others Remote naming it, where they waited for it in the start's
// collectives for ever. Then the settings every rank must share (the backend: `backend`, the
// CommOptions', else SYNK_BACKEND; the simulated nodes, the call checks, whether there is a
// timeline, the fusion and MPI chunk sizes, the shm backend's sizes and forced ways) must be equal:
// else InvalidUsage on every rank naming the first that differs, where ranks hung in a split or
// took different ways through a call (wrong values on one rank).
// yield_when_waiting (CommOptions) too: on mpi it changes which MPI calls a rank makes.
void agree_on_settings(MPI_Comm comm, const std::string& backend, bool yield_when_waiting);

}  // namespace synk::detail
