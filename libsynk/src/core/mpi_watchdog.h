// The deadline of collectives that wait inside MPI's own blocking calls (the mpi backend's, and
// the hier backend's between nodes). MPI cannot be interrupted, so a rank that never joins (one
// that stopped, is busy elsewhere, or rejected its own arguments without SYNK_CHECK_CALLS) used
// to leave the others waiting for ever. A watchdog thread ends a process whose call has waited
// SYNK_TIMEOUT (plus a grace, so that synk's own deadlines inside the call fire first), naming
// the call and the rank; mpirun then ends the job. PyTorch's NCCL watchdog does the same.
#pragma once

#include "core/backend.h"

namespace synk::detail {

// The exit code of a process the watchdog ended (as coreutils' timeout).
constexpr int kWatchdogExitCode = 124;

// Tells the watchdog that this thread's call made progress (a chunk of a long call is done), so
// the deadline counts from here: it bounds each wait, not the whole call. A no-op outside a
// watched call.
void mpi_watch_progress() noexcept;

struct WatchSlot;  // a thread's calls, as the watchdog sees them (mpi_watchdog.cc)

// Arms the watchdog for this thread's call `a` on `rank` of the backend named `backend` (a
// string that outlives the process's calls) for its lifetime. calls_checked: the call was
// compared across the ranks first (SYNK_CHECK_CALLS, or a backend that always does), so no rank
// can be in it with arguments the others rejected. Costs a few stores per call; the
// text of the error is only made when it fires.
class MpiWatch {
 public:
  MpiWatch(const CollArgs& a, int rank, const char* backend, bool calls_checked,
           double timeout_s);
  // For a collective step of synk's own that is no call (`step`: "making a communicator",
  // "split", "alloc", "Data::set_value"...), which every rank of the communicator must make;
  // its deadline is timeout_s, but at least 10 s. A watch made while this thread's is armed (a
  // step inside a step) watches nothing: the outer one goes on.
  MpiWatch(const char* step, int rank, double timeout_s);
  ~MpiWatch();
  MpiWatch(const MpiWatch&) = delete;
  MpiWatch& operator=(const MpiWatch&) = delete;

 private:
  int slot_ = -1;  // -1: not armed (more threads than slots)
  // This thread's pointer to its armed slot, found once per call: a thread_local of a shared
  // library costs a lookup on each use.
  WatchSlot** armed_cell_ = nullptr;
};

// The watch over a collective step of synk's own on `comm` that is no call (MpiWatch's second
// form), with SYNK_TIMEOUT's deadline: a rank that never takes it ends the others after that
// (at least 10 s), where they waited inside MPI for ever.
MpiWatch watch_step(const char* step, MPI_Comm comm);

}  // namespace synk::detail
