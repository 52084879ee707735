// Values and sizes shared by the collectives grids (tests/multirank and tests/nccl): all twelve
// types, the count limit of a run, roots, the data-movement pattern and the reduction inputs.
#pragma once

#include <synk/synk.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "mpi_test.h"

namespace synk_test {

inline constexpr synk::DataType kAllTypes[] = {synk::DataType::int8,    synk::DataType::uint8,
                                               synk::DataType::int16,   synk::DataType::uint16,
                                               synk::DataType::int32,   synk::DataType::uint32,
                                               synk::DataType::int64,   synk::DataType::uint64,
                                               synk::DataType::float16, synk::DataType::bfloat16,
                                               synk::DataType::float32, synk::DataType::float64};

// SYNK_TEST_MAX_COUNT is read by the grid binary only (it is not a libsynk variable): cases
// with a larger count are not registered, so that the run with SYNK_MPI_MAX_CHUNK=1000, where
// every call goes through many chunks, stays short.
inline std::size_t max_count() {
  static const std::size_t m = [] {
    const char* v = std::getenv("SYNK_TEST_MAX_COUNT");
    return v && *v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : SIZE_MAX;
  }();
  return m;
}

enum class Root { first, last };  // rank 0 or rank size-1

inline int root_of(Root r, int size) { return r == Root::last ? size - 1 : 0; }

// Data of rank r, element i, for the data-movement collectives: 0..100, exact everywhere.
inline double data(int r, std::size_t i) {
  return static_cast<double>((static_cast<std::size_t>(r) * 31 + i) % 101);
}

// The reduction inputs. Patterns with an odd prime period (3, 31, 101) in i, so that data
// landing one chunk off (1000, 2^20 or 2^31-1 elements, or a power-of-2 shm slot) never looks
// right by accident; every result fits int8 (<= 127) and is an integer below 256, hence exact
// in bfloat16.
//  sum, avg: 1 + (7r + i) % 31   -> sums <= 124 on 4 ranks
//  prod:     1 + (r + i) % 3     -> products <= 81 on 4 ranks
//  min, max: (31r + 7i) % 101, minus 50 on signed types, so a signedness mistake shows
inline double reduce_input(synk::ReduceOp op, synk::DataType t, int r, std::size_t i) {
  const auto ur = static_cast<std::size_t>(r);
  switch (op) {
    case synk::ReduceOp::prod:
      return static_cast<double>(1 + (ur + i) % 3);
    case synk::ReduceOp::min:
    case synk::ReduceOp::max:
      return static_cast<double>((31 * ur + 7 * i) % 101) - (is_signed(t) ? 50 : 0);
    default:
      return static_cast<double>(1 + (7 * ur + i) % 31);
  }
}

// op over reduce_input of ranks 0..n-1, in rank order; for avg the sum, which each grid divides
// the way the backends it checks do.
inline double reduce_over_ranks(synk::ReduceOp op, synk::DataType t, int n, std::size_t i) {
  double acc = reduce_input(op, t, 0, i);
  for (int r = 1; r < n; ++r) {
    const double v = reduce_input(op, t, r, i);
    if (op == synk::ReduceOp::prod) acc *= v;
    else if (op == synk::ReduceOp::min) acc = v < acc ? v : acc;
    else if (op == synk::ReduceOp::max) acc = v > acc ? v : acc;
    else acc += v;
  }
  return acc;
}

}  // namespace synk_test
