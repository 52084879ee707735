// Named segments left in /dev/shm by a creator that died before every rank had mapped them
// (segment.h: the name lives only for that window). The creator holds an exclusive flock on the
// file for as long as the name exists, taken before the file has any size, so a sweeper that
// gets the lock on a segment of this user that has a size knows its creator is gone, in any
// PID namespace, however its pid was reused. libsynk sweeps when a job sets up shared memory,
// synkrun when a job ends.
#pragma once

#include <string>
#include <vector>

namespace synk::shm {

// An empty segment may be one whose creator is between creating it and locking it: removed
// only once this old (a creator killed in that instant left 0 bytes behind).
inline constexpr int kEmptySegmentGraceSeconds = 60;

// Removes this user's stale synk segments from `dir` (where shm_open keeps them) and returns
// their names. Never throws; what cannot be read is left alone.
std::vector<std::string> remove_stale_segments(const std::string& dir = "/dev/shm");

}  // namespace synk::shm
