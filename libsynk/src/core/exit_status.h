// An error found where it cannot be thrown (a communicator's close, which runs in a destructor)
// must still fail the process: otherwise a job whose last calls were mismatched ends with exit
// status 0, as if its results were right.
#pragma once

namespace synk::detail {

// From now on, the process's exit status is 1 where it would be 0 (exit, or a return from
// main), after its other exit handlers have run. Once called, it stays so; any thread.
void fail_exit_status() noexcept;

}  // namespace synk::detail
