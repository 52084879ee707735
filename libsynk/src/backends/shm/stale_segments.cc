// See stale_segments.h.
#include "backends/shm/stale_segments.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

#include "backends/shm/segment.h"

namespace synk::shm {
namespace {

// Whether the segment open as `fd` has been left by a dead creator: this user's, 0600, and not
// locked by its creator. Called with the lock taken by this sweeper.
bool is_stale(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 0777) != 0600) {
    return false;
  }
  if (st.st_size > 0) return true;
  return std::time(nullptr) - st.st_ctime > kEmptySegmentGraceSeconds;
}

}  // namespace

std::vector<std::string> remove_stale_segments(const std::string& dir) {
  std::vector<std::string> removed;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return removed;
  const int dir_fd = dirfd(d);
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(kSegmentPrefix, 0) != 0) continue;
    // Read-only is enough for a lock; no-follow and non-blocking: nothing but a segment is used.
    const int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    // Still holding the lock while removing it: a creator cannot be half-way in between.
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && is_stale(fd) &&
        unlinkat(dir_fd, name.c_str(), 0) == 0) {
      removed.push_back(name);
    }
    close(fd);
  }
  closedir(d);
  return removed;
}

}  // namespace synk::shm
