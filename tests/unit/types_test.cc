// DataType/ReduceOp names, sizes and parsing, and the float16/bfloat16 conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "synk/types.h"

namespace synk {
namespace {

TEST(Types, SizesAndNames) {
  EXPECT_EQ(size_of(DataType::int8), 1u);
  EXPECT_EQ(size_of(DataType::uint8), 1u);
  EXPECT_EQ(size_of(DataType::int16), 2u);
  EXPECT_EQ(size_of(DataType::uint16), 2u);
  EXPECT_EQ(size_of(DataType::int32), 4u);
  EXPECT_EQ(size_of(DataType::uint32), 4u);
  EXPECT_EQ(size_of(DataType::int64), 8u);
  EXPECT_EQ(size_of(DataType::uint64), 8u);
  EXPECT_EQ(size_of(DataType::float16), 2u);
  EXPECT_EQ(size_of(DataType::bfloat16), 2u);
  EXPECT_EQ(size_of(DataType::float32), 4u);
  EXPECT_EQ(size_of(DataType::float64), 8u);
  EXPECT_EQ(size_of(static_cast<DataType>(42)), 0u);
  EXPECT_STREQ(to_string(static_cast<DataType>(42)), "invalid");
  EXPECT_STREQ(to_string(static_cast<ReduceOp>(-1)), "invalid");
  for (int i = 0; i < kNumDataTypes; ++i) {
    const auto t = static_cast<DataType>(i);
    EXPECT_TRUE(is_valid(t));
    EXPECT_EQ(parse_data_type(to_string(t)), t) << to_string(t);
  }
  for (int i = 0; i < kNumReduceOps; ++i) {
    const auto op = static_cast<ReduceOp>(i);
    EXPECT_EQ(parse_reduce_op(to_string(op)), op) << to_string(op);
  }
  EXPECT_FALSE(is_valid(static_cast<DataType>(kNumDataTypes)));
  EXPECT_FALSE(is_valid(static_cast<ReduceOp>(kNumReduceOps)));
}

TEST(Types, ParseAliasesAndRejects) {
  EXPECT_EQ(parse_data_type("float"), DataType::float32);
  EXPECT_EQ(parse_data_type("HALF"), DataType::float16);
  EXPECT_EQ(parse_data_type("bf16"), DataType::bfloat16);
  EXPECT_EQ(parse_data_type("double"), DataType::float64);
  EXPECT_EQ(parse_data_type("short"), DataType::int16);
  EXPECT_EQ(parse_data_type("uint16"), DataType::uint16);
  EXPECT_EQ(parse_reduce_op("MEAN"), ReduceOp::avg);
  EXPECT_EQ(parse_reduce_op("Average"), ReduceOp::avg);
  EXPECT_EQ(parse_reduce_op("product"), ReduceOp::prod);
  EXPECT_FALSE(parse_data_type("float128"));
  EXPECT_FALSE(parse_data_type(""));
  EXPECT_FALSE(parse_reduce_op("xor"));
}

TEST(Types, FloatingAndDataTypeOf) {
  EXPECT_TRUE(is_floating(DataType::bfloat16));
  EXPECT_FALSE(is_floating(DataType::uint64));
  static_assert(data_type_of<float>() == DataType::float32);
  static_assert(data_type_of<const double>() == DataType::float64);
  static_assert(data_type_of<float16>() == DataType::float16);
  static_assert(data_type_of<std::int8_t>() == DataType::int8);
  static_assert(data_type_of<std::int16_t>() == DataType::int16);
  static_assert(data_type_of<std::uint16_t>() == DataType::uint16);
  EXPECT_FALSE(is_floating(DataType::int16));
}

// visit_type hands fn the C++ type of every DataType (the one data_type_of maps back), and
// refuses a value that is not a DataType.
TEST(Types, VisitTypeMatchesDataTypeOf) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    const auto t = static_cast<DataType>(i);
    EXPECT_EQ(visit_type(t, [](auto tag) { return data_type_of<decltype(tag)>(); }), t);
    EXPECT_EQ(visit_type(t, [](auto tag) { return sizeof(tag); }), size_of(t));
  }
  try {
    visit_type(static_cast<DataType>(99), [](auto) { return 0; });
    ADD_FAILURE() << "no error for DataType 99";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("99 is not a DataType"), std::string::npos) << e.what();
  }
}

float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Every float16 value converts to float and back to the same bits (NaNs stay NaN).
TEST(Half, Float16RoundTripIsExactForAllValues) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const float16 h{static_cast<std::uint16_t>(b)};
    const float f = to_float(h);
    const float16 back = to_float16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(to_float(back))) << std::hex << b;
    } else {
      ASSERT_EQ(back.bits, h.bits) << std::hex << b << " -> " << f;
    }
  }
}

TEST(Half, Float16KnownValuesAndRounding) {
  EXPECT_EQ(to_float16(1.0f).bits, 0x3c00);
  EXPECT_EQ(to_float16(-2.0f).bits, 0xc000);
  EXPECT_EQ(to_float16(65504.0f).bits, 0x7bff);          // largest finite
  EXPECT_EQ(to_float16(65520.0f).bits, 0x7c00);          // halfway to 65536: ties to even = inf
  EXPECT_EQ(to_float16(1e9f).bits, 0x7c00);
  EXPECT_EQ(to_float16(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(to_float16(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie rounds to even (zero)
  EXPECT_EQ(to_float16(std::ldexp(1.5f, -25)).bits, 0x0001);
  // 1 + 2^-11 is halfway between 1 and the next float16: ties to even gives 1.
  EXPECT_EQ(to_float16(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);
  // 1 + 3 * 2^-11 is halfway between two odd/even neighbours: rounds up to the even one.
  EXPECT_EQ(to_float16(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);
  EXPECT_EQ(to_float(float16{0x3555}), bits_to_float(0x3eaaa000));  // 0.33325195
}

TEST(Half, Bfloat16RoundTripAndRounding) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const bfloat16 h{static_cast<std::uint16_t>(b)};
    const float f = to_float(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(to_float(to_bfloat16(f))));
    } else {
      ASSERT_EQ(to_bfloat16(f).bits, h.bits) << std::hex << b;
    }
  }
  EXPECT_EQ(to_bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_bfloat16(bits_to_float(0x3f808000)).bits, 0x3f80);  // tie -> even
  EXPECT_EQ(to_bfloat16(bits_to_float(0x3f818000)).bits, 0x3f82);  // tie -> even (up)
  EXPECT_EQ(to_bfloat16(bits_to_float(0x3f808001)).bits, 0x3f81);  // above tie -> up
  EXPECT_TRUE(std::isnan(to_float(to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  // Integers up to 256 are exact in bfloat16 (what the multi-rank tests rely on).
  for (int i = 0; i <= 256; ++i) EXPECT_EQ(to_float(to_bfloat16(static_cast<float>(i))), i);
}

}  // namespace
}  // namespace synk
