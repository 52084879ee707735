// What synk must do while MPI still works, when the program (or synk's exit handler) calls
// MPI_Finalize: close the KeyValues, finish the non-blocking calls still queued. MPI_Finalize
// deletes MPI_COMM_SELF's attributes first; one attribute's delete callback runs the hooks,
// the last registered first, and from then on synk's calls are refused.
#pragma once

#include <functional>

namespace synk::detail {

// Registers `hook` for MPI_Finalize (MPI must be initialized). A hook must not throw.
void at_mpi_finalize(std::function<void()> hook);

// Whether MPI_Finalize has started (the hooks have run): a relaxed load, for every call.
bool mpi_finalize_started();

// Throws InvalidUsage naming `what` once MPI_Finalize has started.
void refuse_after_finalize(const char* what);

}  // namespace synk::detail
