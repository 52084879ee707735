// Byte offsets into untyped buffers, and the copy that skips itself in place, for the shm
// algorithms (algorithms/).
#pragma once

#include <cstddef>
#include <cstring>

namespace synk::shm {

inline const unsigned char* cat(const void* p, std::size_t bytes) {
  return static_cast<const unsigned char*>(p) + bytes;
}
inline unsigned char* at(void* p, std::size_t bytes) { return static_cast<unsigned char*>(p) + bytes; }

// memcpy, except that nothing moves when there is nothing to move or dst is src (in place).
inline void copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes && dst != src) std::memcpy(dst, src, bytes);
}

}  // namespace synk::shm
