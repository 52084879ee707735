// Whether a process of this node still runs, for waits that must end when a peer dies.
#pragma once

#include <cstdint>

namespace synk::detail {

// False once the process is gone or a zombie (dead, not yet reaped by its parent, which under
// mpirun can take a while: it still answers kill(pid, 0) but shows state 'Z' in /proc).
bool process_alive(long long pid);

// This process's PID namespace (the inode of /proc/self/ns/pid), or 0 where it cannot be read.
// A peer's pid means something here only if the peer's namespace is this one: a rank started in
// a container of its own on the same node has a pid that is nobody, or another process, here.
std::uint64_t pid_namespace_id();

// Whether a peer's `pid` may be watched from here (process_alive), given the peer's and this
// process's pid_namespace_id(): only in the same namespace, and where either is unknown (0),
// only if that pid is visible here now (otherwise its absence would read as a death).
bool pid_watchable(long long pid, std::uint64_t peer_namespace, std::uint64_t own_namespace);

}  // namespace synk::detail
