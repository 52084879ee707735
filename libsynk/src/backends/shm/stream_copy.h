// memcpy with non-temporal stores (SSE2, part of every x86-64): the destination lines go to
// memory without being read first and without staying in this core's cache. See
// store_tuner.h for when the shm collectives use it. Elsewhere it is plain memcpy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace synk::shm {

// Streaming stores are weakly ordered: stream_fence() must come between them and the release
// store that tells another rank to read them (StepChannel::post does it, once for all the copies of
// a step: a fence after every piece of a piecewise copy stalled it each time).
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

inline void stream_copy(void* dst, const void* src, std::size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  auto* s = static_cast<const unsigned char*>(src);
#if defined(__SSE2__)
  const std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;
  if (bytes >= head + 64) {
    std::memcpy(d, s, head);  // up to dst's first 16-byte boundary
    d += head;
    s += head;
    bytes -= head;
    for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
  }
#endif
  if (bytes) std::memcpy(d, s, bytes);
}

}  // namespace synk::shm
