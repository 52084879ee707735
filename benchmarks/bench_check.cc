// See bench_check.h. Every expected value is a closed form of the element index, so the check
// costs one pass over the result whatever the number of ranks.
#include "bench_check.h"

#include <algorithm>
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

long long reduce_input(ReduceOp op, int rank, std::size_t j, int n) {
  if (op == ReduceOp::prod) {
    return j % static_cast<std::size_t>(n) == static_cast<std::size_t>(rank)
               ? 1 + static_cast<long long>(j % 3)
               : 1;
  }
  return 1 + static_cast<long long>((static_cast<std::size_t>(rank) + j) % 3);
}

// The reduction over ranks 0..n-1 of reduce_input(op, r, j, n), without the loop over ranks:
// (r + j) % 3 repeats every 3 ranks.
long long reduce_result(ReduceOp op, std::size_t j, int n) {
  const long long r3 = std::min(n, 3);  // ranks 0..r3-1 show every residue that occurs
  switch (op) {
    case ReduceOp::prod:
      return 1 + static_cast<long long>(j % 3);
    case ReduceOp::min:
    case ReduceOp::max: {
      long long lo = 3, hi = 1;
      for (long long t = 0; t < r3; ++t) {
        const long long v = 1 + static_cast<long long>((static_cast<std::size_t>(t) + j) % 3);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      return op == ReduceOp::min ? lo : hi;
    }
    case ReduceOp::sum:
    case ReduceOp::avg: {
      long long s = n + 3 * (n / 3);  // the 1s, and 0+1+2 per full cycle of 3 ranks
      for (long long t = 0; t < n % 3; ++t) {
        s += static_cast<long long>((static_cast<std::size_t>(t) + j) % 3);
      }
      return s;
    }
  }
  return 0;
}

long long move_value(int rank, std::size_t i) {
  return static_cast<long long>((static_cast<std::size_t>(rank) * 31 + i) % 100);
}

template <class T>
T expected_reduction(ReduceOp op, std::size_t j, int n) {
  const long long v = reduce_result(op, j, n);
  if (op == ReduceOp::avg) return average<T>(v, n);
  return from_int<T>(v);
}

template <class T>
void fill_typed(const CallArgs& a, int rank, int n) {
  const Layout& l = a.layout;
  T* send = static_cast<T*>(a.send);
  if (l.recv_bytes > 0) std::memset(a.recv, 0xff, l.recv_bytes);
  switch (a.coll) {
    case Coll::allreduce:
    case Coll::reduce:
    case Coll::reduce_scatter:
      for (std::size_t j = 0; j < l.count; ++j)
        send[j] = from_int<T>(reduce_input(a.op, rank, j, n));
      break;
    case Coll::broadcast:
      if (rank == a.root) {
        T* buf = static_cast<T*>(a.recv);
        for (std::size_t i = 0; i < l.count; ++i) buf[i] = from_int<T>(move_value(a.root, i));
      }
      break;
    case Coll::allgather:
    case Coll::gather:
      for (std::size_t i = 0; i < l.block; ++i) send[i] = from_int<T>(move_value(rank, i));
      break;
    case Coll::scatter:
      for (int r = 0; r < n; ++r) {
        T* block = send + static_cast<std::size_t>(r) * l.block;
        for (std::size_t i = 0; i < l.block; ++i) block[i] = from_int<T>(move_value(r, i));
      }
      break;
  }
}

template <class T>
std::uint64_t count_blocks(const T* recv, std::size_t block, int n) {
  std::uint64_t wrong = 0;
  for (int r = 0; r < n; ++r) {
    const T* b = recv + static_cast<std::size_t>(r) * block;
    for (std::size_t i = 0; i < block; ++i) wrong += !same(b[i], from_int<T>(move_value(r, i)));
  }
  return wrong;
}

template <class T>
std::uint64_t count_typed(const CallArgs& a, int rank, int n) {
  const Layout& l = a.layout;
  const T* recv = static_cast<const T*>(a.recv);
  std::uint64_t wrong = 0;
  switch (a.coll) {
    case Coll::reduce:
      if (rank != a.root) break;
      [[fallthrough]];
    case Coll::allreduce:
      for (std::size_t j = 0; j < l.count; ++j) {
        wrong += !same(recv[j], expected_reduction<T>(a.op, j, n));
      }
      break;
    case Coll::reduce_scatter: {
      const std::size_t first = static_cast<std::size_t>(rank) * l.block;
      for (std::size_t i = 0; i < l.block; ++i) {
        wrong += !same(recv[i], expected_reduction<T>(a.op, first + i, n));
      }
      break;
    }
    case Coll::broadcast:
      for (std::size_t i = 0; i < l.count; ++i)
        wrong += !same(recv[i], from_int<T>(move_value(a.root, i)));
      break;
    case Coll::gather:
      if (rank != a.root) break;
      [[fallthrough]];
    case Coll::allgather:
      wrong = count_blocks(recv, l.block, n);
      break;
    case Coll::scatter:
      for (std::size_t i = 0; i < l.block; ++i)
        wrong += !same(recv[i], from_int<T>(move_value(rank, i)));
      break;
  }
  return wrong;
}

}  // namespace

void fill_buffers(const CallArgs& a, int rank, int nranks) {
  synk::visit_type(a.dtype, [&](auto tag) { fill_typed<decltype(tag)>(a, rank, nranks); });
}

std::uint64_t count_wrong(const CallArgs& a, int rank, int nranks) {
  return synk::visit_type(a.dtype,
                         [&](auto tag) { return count_typed<decltype(tag)>(a, rank, nranks); });
}

}  // namespace synk::bench
