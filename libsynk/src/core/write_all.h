// Writing a whole buffer to a descriptor, through short writes and EINTR (synkrun's relays and
// topology export, SYNK_TIMELINE's file).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace synk::detail {

// False when a write failed (errno says why: EPIPE for a closed pipe).
inline bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace synk::detail
