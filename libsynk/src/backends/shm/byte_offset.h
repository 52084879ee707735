// Byte offsets into untyped buffers (core/byte_offset.h), and the copy that skips itself in
// place, for the shm algorithms (algorithms/).
#pragma once

#include <cstddef>
#include <cstring>

#include "core/byte_offset.h"

namespace synk::shm {

using detail::at;

// memcpy, except that nothing moves when there is nothing to move or dst is src (in place).
inline void copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes && dst != src) std::memcpy(dst, src, bytes);
}

}  // namespace synk::shm
