// Whether a process of this node still runs, for waits that must end when a peer dies.
#pragma once

namespace synk::detail {

// False once the process is gone or a zombie (dead, not yet reaped by its parent, which under
// mpirun can take a while: it still answers kill(pid, 0) but shows state 'Z' in /proc).
bool process_alive(long long pid);

}  // namespace synk::detail
