// See reduce_kernels.h. Loops are written so the compiler vectorizes them (this file is built
// with -O3): one pass per source over an L1-sized block that stays in cache.
#include "backends/shm/reduce_kernels.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace synk::shm {

namespace {

constexpr std::size_t kBlock = 2048;  // elements per block: the accumulator stays in L1

// Integer arithmetic wraps (two's complement; Open MPI's saturates some: library.md says where)
// instead of overflowing, so it is done unsigned, and at least as wide as unsigned int: narrower
// types are promoted to int, whose products of two 16-bit values overflow.
template <class T, bool = std::is_integral_v<T>>
struct ArithOf {
  using type = T;
};
template <class T>
struct ArithOf<T, true> {
  using type = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                                  std::make_unsigned_t<T>>;
};
template <class T>
using Arith = typename ArithOf<T>::type;

template <class T, ReduceOp Op>
inline T combine(T a, T b) {
  if constexpr (Op == ReduceOp::sum || Op == ReduceOp::avg) {
    return static_cast<T>(static_cast<Arith<T>>(a) + static_cast<Arith<T>>(b));
  } else if constexpr (Op == ReduceOp::prod) {
    return static_cast<T>(static_cast<Arith<T>>(a) * static_cast<Arith<T>>(b));
  } else if constexpr (Op == ReduceOp::min) {
    return b < a ? b : a;
  } else {
    return a < b ? b : a;
  }
}

template <class T, ReduceOp Op>
void reduce_native(T* dst, const void* const* srcs, int nsrc, std::size_t count,
                   int scale_n) {
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t n = std::min(kBlock, count - base);
    T* d = dst + base;  // may alias srcs[0] (element i is read before it is written)
    const T* s0 = static_cast<const T*>(srcs[0]) + base;
    if (nsrc == 1) {
      if (d != s0) std::copy(s0, s0 + n, d);
    } else {
      const T* __restrict s1 = static_cast<const T*>(srcs[1]) + base;
      for (std::size_t i = 0; i < n; ++i) d[i] = combine<T, Op>(s0[i], s1[i]);
    }
    for (int k = 2; k < nsrc; ++k) {
      const T* __restrict s = static_cast<const T*>(srcs[k]) + base;
      for (std::size_t i = 0; i < n; ++i) d[i] = combine<T, Op>(d[i], s[i]);
    }
    if constexpr (Op == ReduceOp::avg) {
      const T inv = T(1) / static_cast<T>(scale_n);
      for (std::size_t i = 0; i < n; ++i) d[i] *= inv;
    }
  }
}

template <class H>
inline float widen(H h) {
  return to_float(h);
}
template <class H>
inline H narrow(float f) {
  if constexpr (std::is_same_v<H, float16>) {
    return to_float16(f);
  } else {
    return to_bfloat16(f);
  }
}

// 16-bit floats: widen into a float block, reduce there, round once.
template <class H, ReduceOp Op>
void reduce_half(H* dst, const void* const* srcs, int nsrc, std::size_t count, int scale_n) {
  float acc[kBlock];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t n = std::min(kBlock, count - base);
    const H* s0 = static_cast<const H*>(srcs[0]) + base;
    for (std::size_t i = 0; i < n; ++i) acc[i] = widen(s0[i]);
    for (int k = 1; k < nsrc; ++k) {
      const H* s = static_cast<const H*>(srcs[k]) + base;
      for (std::size_t i = 0; i < n; ++i) acc[i] = combine<float, Op>(acc[i], widen(s[i]));
    }
    if constexpr (Op == ReduceOp::avg) {
      const float inv = 1.0f / static_cast<float>(scale_n);
      for (std::size_t i = 0; i < n; ++i) acc[i] *= inv;
    }
    H* d = dst + base;
    for (std::size_t i = 0; i < n; ++i) d[i] = narrow<H>(acc[i]);
  }
}

template <class T>
void reduce_typed(void* dst, const void* const* srcs, int nsrc, std::size_t count, ReduceOp op,
                  int scale_n) {
  T* d = static_cast<T*>(dst);
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    switch (op) {
      case ReduceOp::sum: return reduce_half<T, ReduceOp::sum>(d, srcs, nsrc, count, scale_n);
      case ReduceOp::prod: return reduce_half<T, ReduceOp::prod>(d, srcs, nsrc, count, scale_n);
      case ReduceOp::min: return reduce_half<T, ReduceOp::min>(d, srcs, nsrc, count, scale_n);
      case ReduceOp::max: return reduce_half<T, ReduceOp::max>(d, srcs, nsrc, count, scale_n);
      case ReduceOp::avg: return reduce_half<T, ReduceOp::avg>(d, srcs, nsrc, count, scale_n);
    }
  } else {
    switch (op) {
      case ReduceOp::sum: return reduce_native<T, ReduceOp::sum>(d, srcs, nsrc, count, scale_n);
      case ReduceOp::prod: return reduce_native<T, ReduceOp::prod>(d, srcs, nsrc, count, scale_n);
      case ReduceOp::min: return reduce_native<T, ReduceOp::min>(d, srcs, nsrc, count, scale_n);
      case ReduceOp::max: return reduce_native<T, ReduceOp::max>(d, srcs, nsrc, count, scale_n);
      case ReduceOp::avg:
        if constexpr (std::is_floating_point_v<T>) {
          return reduce_native<T, ReduceOp::avg>(d, srcs, nsrc, count, scale_n);
        }
        return;  // integer avg is rejected by validation before it gets here
    }
  }
}

}  // namespace

void reduce_into(void* dst, const void* const* srcs, int nsrc, std::size_t count, DataType t,
                 ReduceOp op, int scale_n) {
  visit_type(t, [&](auto tag) {
    reduce_typed<decltype(tag)>(dst, srcs, nsrc, count, op, scale_n);
  });
}

}  // namespace synk::shm
