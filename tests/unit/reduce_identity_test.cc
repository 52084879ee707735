// The identity element of each reduction and dtype (KeyValue::join's shadow pushes): reducing
// it with any value gives that value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/reduce_identity.h"

namespace synk::detail {
namespace {

template <class T>
std::vector<T> identity(ReduceOp op, std::size_t n = 3) {
  std::vector<T> v(n, T{7});
  fill_identity(v.data(), n, data_type_of<T>(), op);
  return v;
}

TEST(ReduceIdentity, IntegersAndFloats) {
  EXPECT_EQ(identity<int32_t>(ReduceOp::sum), (std::vector<int32_t>(3, 0)));
  EXPECT_EQ(identity<int8_t>(ReduceOp::prod), (std::vector<int8_t>(3, 1)));
  EXPECT_EQ(identity<int16_t>(ReduceOp::max)[0], std::numeric_limits<int16_t>::lowest());
  EXPECT_EQ(identity<uint64_t>(ReduceOp::min)[2], std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(identity<uint8_t>(ReduceOp::max)[1], 0);
  EXPECT_EQ(identity<float>(ReduceOp::avg), (std::vector<float>(3, 0.0f)));
  EXPECT_EQ(identity<double>(ReduceOp::min)[0], std::numeric_limits<double>::infinity());
  EXPECT_EQ(identity<float>(ReduceOp::max)[0], -std::numeric_limits<float>::infinity());
}

// float16 and bfloat16 by their bits: +inf for min, -inf for max, 1 for prod.
TEST(ReduceIdentity, HalfTypesByTheirBits) {
  const auto bits = [](DataType t, ReduceOp op) {
    std::uint16_t v = 0x1234;
    fill_identity(&v, 1, t, op);
    return v;
  };
  EXPECT_EQ(bits(DataType::float16, ReduceOp::min), 0x7C00);
  EXPECT_EQ(bits(DataType::float16, ReduceOp::max), 0xFC00);
  EXPECT_EQ(bits(DataType::float16, ReduceOp::prod), 0x3C00);
  EXPECT_EQ(bits(DataType::bfloat16, ReduceOp::min), 0x7F80);
  EXPECT_EQ(bits(DataType::bfloat16, ReduceOp::max), 0xFF80);
  EXPECT_EQ(bits(DataType::bfloat16, ReduceOp::prod), 0x3F80);
  EXPECT_EQ(bits(DataType::bfloat16, ReduceOp::sum), 0);
}

}  // namespace
}  // namespace synk::detail
