// Values and sizes shared by the collectives grid's two files: all ten types, the count limit
// of a run, roots, and the data-movement pattern.
#pragma once

#include <synk/synk.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace synk_test {

inline constexpr synk::DataType kAllTypes[] = {synk::DataType::int8,    synk::DataType::uint8,
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

}  // namespace synk_test
