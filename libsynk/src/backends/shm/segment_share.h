// One segment for the ranks of a node: rank 0 of the communicator creates it and every rank maps
// it, anonymous where that works (nothing in /dev/shm at any moment, so a rank killed during the
// set-up, or a job aborted then, leaves nothing behind), named otherwise (segment.h).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>

#include "backends/shm/segment.h"

namespace synk::shm {

struct SharedSegment {
  Segment segment;       // mapped on this rank when ok
  bool ok = false;       // every rank mapped it
  bool created = false;  // rank 0 made it; if not, `error` is rank 0's reason, on every rank
  std::string error;     // why this rank failed; empty on a rank that did its part
};

enum class SegmentKind {
  any,    // anonymous, or named where an anonymous one cannot be shared, is too large, or
          // SYNK_SHM_SEGMENTS=named asks for named ones
  named,  // named only
};

// Collective over `comm`, whose ranks are on one node. Never throws for a failure to create or
// map (the result says, on every rank, so that callers can agree on an error); MPI errors throw.
SharedSegment try_share_segment(MPI_Comm comm, std::size_t bytes,
                                SegmentKind kind = SegmentKind::any);

// A field of /proc/meminfo's text ("MemAvailable"), in bytes; nullopt where it is missing.
std::optional<std::uint64_t> meminfo_bytes(const std::string& meminfo, const std::string& field);

// The largest anonymous segment made: half of the memory the process may still take (the
// kernel's MemAvailable, or less under a cgroup memory limit), and no more than leaves all shared
// memory (Shmem: memfds, tmpfs) within half the machine's, as /dev/shm's default size bounds
// named segments. Why a limit: a memfd has none of its own, so reserving a segment larger than
// memory would not fail as /dev/shm's size makes a named one fail ("cannot reserve"), but run
// the machine out of memory. Larger segments are named, and /dev/shm's size decides.
std::uint64_t anonymous_segment_limit();
// The same from the text of /proc/meminfo and the room the cgroups leave (cgroup_memory_room).
std::uint64_t anonymous_segment_limit(const std::string& meminfo, std::uint64_t cgroup_room);
// The largest named segment made: what the process may still take (MemAvailable and SwapFree,
// or less under a cgroup memory limit); UINT64_MAX where /proc/meminfo says nothing. /dev/shm
// is bounded by its size, but where that is larger than memory (seen on a GPU VM) a reservation
// beyond it ran the machine out of memory instead of failing.
std::uint64_t named_segment_limit();
// The same from the text of /proc/meminfo and the room the cgroups leave.
std::uint64_t named_segment_limit(const std::string& meminfo, std::uint64_t cgroup_room);
// "cannot reserve N bytes of `what`: ..." where `bytes` is more than named_segment_limit(), else
// "": a request larger than memory is an error when it is made, also where the kernel
// overcommits (vm.overcommit_memory=1) and would kill the process later instead.
std::string memory_room_error(std::uint64_t bytes, const std::string& what);
// The least room (limit minus usage) of a process's memory cgroup and its ancestors, or
// UINT64_MAX for no limit, with `self_cgroup` the text of /proc/<pid>/cgroup and `root` where the
// cgroup file systems are mounted (v2 memory.max and memory.current; v1 memory.limit_in_bytes
// and memory.usage_in_bytes under root/memory).
std::uint64_t cgroup_memory_room(const std::string& self_cgroup, const std::string& root);

}  // namespace synk::shm
