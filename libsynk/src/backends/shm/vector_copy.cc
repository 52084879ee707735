// See vector_copy.h.
#include "backends/shm/vector_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SYNK_VECTOR_COPY_AVX2 1
#endif

namespace synk::shm {

namespace {

#if defined(SYNK_VECTOR_COPY_AVX2)
__attribute__((target("avx2"))) void copy_avx2(unsigned char* d, const unsigned char* s,
                                               std::size_t bytes) {
  // Stores aligned to 32 bytes, as glibc's loop does: an unaligned store that crosses a line
  // costs two. (Where source and destination sit alike in their pages, as the slots are placed,
  // the loads are aligned too.)
  const std::size_t head = (32 - (reinterpret_cast<std::uintptr_t>(d) & 31)) & 31;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 128; bytes -= 128, d += 128, s += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_store_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_store_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_store_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_store_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  std::memcpy(d, s, bytes);
}

// Asked once, as the library loads (__builtin_cpu_init first: static initializers may run
// before libgcc has filled in what the CPU supports).
const bool kHaveAvx2 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;
}();
#endif

}  // namespace

void vector_copy(void* dst, const void* src, std::size_t bytes) {
#if defined(SYNK_VECTOR_COPY_AVX2)
  if (bytes >= kVectorCopyMinBytes && kHaveAvx2) {
    return copy_avx2(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
                     bytes);
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace synk::shm
