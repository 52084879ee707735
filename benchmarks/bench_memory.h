// Whether synk-bench's host buffers fit in the node's memory, checked before they are allocated:
// Linux overcommits, so an allocation larger than memory succeeds, and the OOM killer ends the
// job once the buffers are filled (exit 137, no word).
#pragma once

#include <cstdint>
#include <string>

namespace synk::bench {

// The memory a process may still take: the kernel's MemAvailable in `meminfo` (the text of
// /proc/meminfo), and no more than `cgroup_room`; UINT64_MAX when meminfo does not say.
std::uint64_t available_memory(const std::string& meminfo, std::uint64_t cgroup_room);
// This process's now: /proc/meminfo and its cgroups' room (libsynk's cgroup_memory_room, which
// bounds its shm segments too).
std::uint64_t available_memory();

// "" when `ranks_on_node` ranks holding `per_rank` bytes each fit in `available` bytes, else
// why not, as "host buffers of N bytes per rank (... for the R ranks on this node) do not fit
// in the A bytes of memory available (...)".
std::string memory_shortfall(std::uint64_t per_rank, int ranks_on_node, std::uint64_t available);

}  // namespace synk::bench
