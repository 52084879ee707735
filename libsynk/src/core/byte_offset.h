// Byte offsets into untyped buffers, for every backend's algorithms. A null buffer (one a rank
// takes no part in, such as a non-root's recv) stays null, whatever the offset.
#pragma once

#include <cstddef>

namespace synk::detail {

inline const unsigned char* at(const void* p, std::size_t bytes) {
  return p ? static_cast<const unsigned char*>(p) + bytes : nullptr;
}
inline unsigned char* at(void* p, std::size_t bytes) {
  return p ? static_cast<unsigned char*>(p) + bytes : nullptr;
}

}  // namespace synk::detail
