// See bench_check.h. Every expected value is computed from the element index (and, for a
// reduction, the ranks' inputs at that index), outside the timing.
#include "bench_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace synk::bench {

namespace {

template <class T>
constexpr bool kIsHalf = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

// A small integer as a T (integers wrap modulo 2^bits, as MPI's integer sums do).
template <class T>
T from_int(long long v) {
  if constexpr (std::is_same_v<T, float16>) {
    return to_float16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return to_bfloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// avg = sum * (1/n) in the accumulation type (float, or double for float64), rounded once to
// the element type: synk's definition of avg.
template <class T>
T average(long long sum, int n) {
  if constexpr (std::is_same_v<T, double>) {
    return static_cast<double>(sum) * (1.0 / static_cast<double>(n));
  } else {
    const float f = static_cast<float>(sum) * (1.0f / static_cast<float>(n));
    if constexpr (std::is_same_v<T, float16>) {
      return to_float16(f);
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      return to_bfloat16(f);
    } else {
      return static_cast<T>(f);  // float32; integer dtypes never take avg
    }
  }
}

template <class T>
bool same(T got, T want) {
  if constexpr (kIsHalf<T>) {
    return got.bits == want.bits;
  } else {
    return got == want;  // a NaN sentinel never equals
  }
}

// A pseudo-random value of (element, rank, seed): each element's inputs differ from its
// neighbours' and from the other ranks', so a block read from the wrong place, or one rank's
// input lost or counted twice, changes most elements of the result. (With 1 + (r + j) % 3, every
// sum on 3 or 6 ranks was 2n and every min and max on 3 ranks or more was 1 and 3, whatever went
// where.) Another seed gives other values, so a result left from an earlier call is wrong.
std::uint32_t mix(std::size_t j, int r, std::uint32_t seed) {
  const auto rank_word = static_cast<std::uint64_t>(static_cast<std::int64_t>(r) + 1);
  std::uint64_t x = static_cast<std::uint64_t>(j) * 0x9E3779B97F4A7C15ull +
                    rank_word * 0xBF58476D1CE4E5B9ull +
                    static_cast<std::uint64_t>(seed) * 0xD6E8FEB86659FD93ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<std::uint32_t>(x);
}

// The ranks that decide element j of a min, max or prod (they vary by element): `first`, and a
// `second` other rank where there are two ranks or more.
struct Owners {
  int first = 0, second = -1;
};
Owners owners_of(std::size_t j, int n, std::uint32_t seed) {
  const std::uint32_t h = mix(j, -1, seed);
  Owners o;
  o.first = static_cast<int>(h % static_cast<std::uint32_t>(n));
  if (n > 1) {
    const auto step = 1 + (h >> 16) % static_cast<std::uint32_t>(n - 1);
    o.second = static_cast<int>((static_cast<std::uint32_t>(o.first) + step) %
                                static_cast<std::uint32_t>(n));
  }
  return o;
}

// Small values, so that every result is exact in every dtype: sums of 0..3 (an int8 sum wraps
// only past 42 ranks); min and max decided by one rank per element, the only one below 8 (min)
// or at 8 or more (max), so that a wrong result shows at any number of ranks; prod of 2 or 3
// from two ranks per element and 1 from the others (4 to 9, which no max of them gives).
// `own` is the rank's word of the element, mix(j, rank, seed).
long long input_of(ReduceOp op, int rank, const Owners& o, std::uint32_t own) {
  switch (op) {
    case ReduceOp::prod:
      return rank == o.first || rank == o.second ? 2 + (own & 1) : 1;
    case ReduceOp::min:
      return (rank == o.first ? 0 : 8) + (own & 7);
    case ReduceOp::max:
      return (rank == o.first ? 8 : 0) + (own & 7);
    case ReduceOp::sum:
    case ReduceOp::avg:
      return own & 3;
  }
  return 0;
}

long long reduce_input(ReduceOp op, int rank, std::size_t j, int n, std::uint32_t seed) {
  return input_of(op, rank, owners_of(j, n, seed), mix(j, rank, seed));
}

// The reduction over ranks 0..n-1 of reduce_input(op, r, j, n, seed) (the owners found once).
long long reduce_result(ReduceOp op, std::size_t j, int n, std::uint32_t seed) {
  const Owners o = owners_of(j, n, seed);
  long long acc = input_of(op, 0, o, mix(j, 0, seed));
  for (int r = 1; r < n; ++r) {
    const long long v = input_of(op, r, o, mix(j, r, seed));
    switch (op) {
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
    }
  }
  return acc;
}

long long move_value(int rank, std::size_t i, std::uint32_t seed) {
  return mix(i, rank, seed) % 100;
}

template <class T>
T expected_reduction(ReduceOp op, std::size_t j, int n, std::uint32_t seed) {
  const long long v = reduce_result(op, j, n, seed);
  if (op == ReduceOp::avg) return average<T>(v, n);
  return from_int<T>(v);
}

template <class T>
void fill_typed(const CallArgs& a, int rank, int n, std::uint32_t seed) {
  const Layout& l = a.layout;
  T* send = static_cast<T*>(a.send);
  if (l.recv_bytes > 0) std::memset(a.recv, 0xff, l.recv_bytes);
  switch (a.coll) {
    case Coll::allreduce:
    case Coll::reduce:
    case Coll::reduce_scatter:
      for (std::size_t j = 0; j < l.count; ++j)
        send[j] = from_int<T>(reduce_input(a.op, rank, j, n, seed));
      break;
    case Coll::broadcast:
      if (rank == a.root) {
        T* buf = static_cast<T*>(a.recv);
        for (std::size_t i = 0; i < l.count; ++i) buf[i] = from_int<T>(move_value(a.root, i, seed));
      }
      break;
    case Coll::allgather:
    case Coll::gather:
      for (std::size_t i = 0; i < l.block; ++i) send[i] = from_int<T>(move_value(rank, i, seed));
      break;
    case Coll::scatter:
      for (int r = 0; r < n; ++r) {
        T* block = send + static_cast<std::size_t>(r) * l.block;
        for (std::size_t i = 0; i < l.block; ++i) {
          block[i] = from_int<T>(move_value(r, i, seed));
        }
      }
      break;
    case Coll::alltoall:  // block q goes to rank q: values of the pair (rank, q)
      for (int q = 0; q < n; ++q) {
        T* block = send + static_cast<std::size_t>(q) * l.block;
        for (std::size_t i = 0; i < l.block; ++i) {
          block[i] = from_int<T>(move_value(rank * n + q, i, seed));
        }
      }
      break;
  }
}

template <class T>
std::uint64_t count_blocks(const T* recv, std::size_t block, int n, std::uint32_t seed) {
  std::uint64_t wrong = 0;
  for (int r = 0; r < n; ++r) {
    const T* b = recv + static_cast<std::size_t>(r) * block;
    for (std::size_t i = 0; i < block; ++i) {
      wrong += !same(b[i], from_int<T>(move_value(r, i, seed)));
    }
  }
  return wrong;
}

template <class T>
std::uint64_t count_typed(const CallArgs& a, int rank, int n, std::uint32_t seed) {
  const Layout& l = a.layout;
  const T* recv = static_cast<const T*>(a.recv);
  std::uint64_t wrong = 0;
  switch (a.coll) {
    case Coll::reduce:
      if (rank != a.root) break;
      [[fallthrough]];
    case Coll::allreduce:
      for (std::size_t j = 0; j < l.count; ++j) {
        wrong += !same(recv[j], expected_reduction<T>(a.op, j, n, seed));
      }
      break;
    case Coll::reduce_scatter: {
      const std::size_t first = static_cast<std::size_t>(rank) * l.block;
      for (std::size_t i = 0; i < l.block; ++i) {
        wrong += !same(recv[i], expected_reduction<T>(a.op, first + i, n, seed));
      }
      break;
    }
    case Coll::broadcast:
      for (std::size_t i = 0; i < l.count; ++i)
        wrong += !same(recv[i], from_int<T>(move_value(a.root, i, seed)));
      break;
    case Coll::gather:
      if (rank != a.root) break;
      [[fallthrough]];
    case Coll::allgather:
      wrong = count_blocks(recv, l.block, n, seed);
      break;
    case Coll::scatter:
      for (std::size_t i = 0; i < l.block; ++i)
        wrong += !same(recv[i], from_int<T>(move_value(rank, i, seed)));
      break;
    case Coll::alltoall:
      for (int r = 0; r < n; ++r) {
        const T* block = recv + static_cast<std::size_t>(r) * l.block;
        for (std::size_t i = 0; i < l.block; ++i) {
          wrong += !same(block[i], from_int<T>(move_value(r * n + rank, i, seed)));
        }
      }
      break;
  }
  return wrong;
}

}  // namespace

void fill_buffers(const CallArgs& base, int rank, int nranks, std::uint32_t seed) {
  const CallArgs a = placed(base, rank);
  synk::visit_type(a.dtype, [&](auto tag) { fill_typed<decltype(tag)>(a, rank, nranks, seed); });
}

std::uint64_t count_wrong(const CallArgs& base, int rank, int nranks, std::uint32_t seed) {
  const CallArgs a = placed(base, rank);
  return synk::visit_type(
      a.dtype, [&](auto tag) { return count_typed<decltype(tag)>(a, rank, nranks, seed); });
}

}  // namespace synk::bench
