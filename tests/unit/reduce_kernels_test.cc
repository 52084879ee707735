// shm's element-wise reduction (reduce_kernels.h) on integers: sums and products wrap as two's
// complement does (as MPI's do), whatever the width. A product of two 16-bit values was made in
// int, which overflows (undefined; -fsanitize=undefined reported it) past 46340 squared.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backends/shm/reduce_kernels.h"

namespace synk::shm {
namespace {

template <class T>
std::vector<T> reduced(std::vector<T> a, const std::vector<T>& b, ReduceOp op) {
  const void* srcs[2] = {a.data(), b.data()};
  reduce_into(a.data(), srcs, 2, a.size(), data_type_of<T>(), op, 2);
  return a;
}

TEST(ReduceKernels, SixteenBitProductsWrap) {
  const std::vector<std::int16_t> a{-2, -300, 32767, -32768};
  const std::vector<std::int16_t> b{-3, -300, 32767, -1};
  // 6; 90000 mod 2^16 = 24464; 32767^2 mod 2^16 = 1; -32768 * -1 = 32768 -> -32768.
  EXPECT_EQ(reduced(a, b, ReduceOp::prod), (std::vector<std::int16_t>{6, 24464, 1, -32768}));
  const std::vector<std::uint16_t> u{65535, 300, 256};
  const std::vector<std::uint16_t> v{65535, 300, 256};
  EXPECT_EQ(reduced(u, v, ReduceOp::prod), (std::vector<std::uint16_t>{1, 24464, 0}));
}

TEST(ReduceKernels, SumsWrapAtEveryWidth) {
  EXPECT_EQ(reduced<std::int8_t>({127, -128}, {1, -1}, ReduceOp::sum),
            (std::vector<std::int8_t>{-128, 127}));
  EXPECT_EQ(reduced<std::int16_t>({32767, -32768}, {1, -1}, ReduceOp::sum),
            (std::vector<std::int16_t>{-32768, 32767}));
  EXPECT_EQ(reduced<std::uint16_t>({65535}, {2}, ReduceOp::sum), (std::vector<std::uint16_t>{1}));
  EXPECT_EQ(reduced<std::int64_t>({INT64_MAX}, {1}, ReduceOp::sum),
            (std::vector<std::int64_t>{INT64_MIN}));
}

TEST(ReduceKernels, SixteenBitMinAndMaxAreSigned) {
  EXPECT_EQ(reduced<std::int16_t>({-5, 7}, {3, -9}, ReduceOp::min),
            (std::vector<std::int16_t>{-5, -9}));
  EXPECT_EQ(reduced<std::uint16_t>({65535, 1}, {3, 2}, ReduceOp::max),
            (std::vector<std::uint16_t>{65535, 2}));
}

}  // namespace
}  // namespace synk::shm
