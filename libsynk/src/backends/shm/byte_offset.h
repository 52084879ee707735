// Byte offsets into untyped buffers, for the shm collectives (shm_collectives.cc, shm_cma.cc).
#pragma once

#include <cstddef>

namespace synk::shm {

inline const unsigned char* cat(const void* p, std::size_t bytes) {
  return static_cast<const unsigned char*>(p) + bytes;
}
inline unsigned char* at(void* p, std::size_t bytes) { return static_cast<unsigned char*>(p) + bytes; }

}  // namespace synk::shm
