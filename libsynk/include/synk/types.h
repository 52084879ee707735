// The element types and reduction operations synk's collectives take, and the 16-bit
// floating-point storage types (float16, bfloat16) with their conversions to and from float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "synk/error.h"

namespace synk {

enum class DataType : int {
  int8,
  uint8,
  int32,
  uint32,
  int64,
  uint64,
  float16,
  bfloat16,
  float32,
  float64,
  int16,   // after the ten of NCCL's types, so that their values stay as they were
  uint16,
};
inline constexpr int kNumDataTypes = 12;

// avg is sum followed by a multiplication by 1/n (equal weight per rank), computed in the
// accumulation type (float for float16, bfloat16 and float32; double for float64).
// It is an error on integer types.
enum class ReduceOp : int { sum, prod, min, max, avg };
inline constexpr int kNumReduceOps = 5;

bool is_valid(DataType t) noexcept;
bool is_valid(ReduceOp op) noexcept;
// Bytes per element; 0 for an invalid value. Inline: every collective call asks.
inline std::size_t size_of(DataType t) noexcept {
  switch (t) {
    case DataType::int8:
    case DataType::uint8: return 1;
    case DataType::int16:
    case DataType::uint16:
    case DataType::float16:
    case DataType::bfloat16: return 2;
    case DataType::int32:
    case DataType::uint32:
    case DataType::float32: return 4;
    case DataType::int64:
    case DataType::uint64:
    case DataType::float64: return 8;
  }
  return 0;
}
bool is_floating(DataType t) noexcept;
const char* to_string(DataType t) noexcept;  // "float32"; "invalid" for an invalid value
const char* to_string(ReduceOp op) noexcept;  // "sum"
std::optional<DataType> parse_data_type(std::string_view name);  // also "float", "half", "bf16"...
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

// IEEE 754 binary16, stored as its bits.
struct float16 {
  std::uint16_t bits = 0;
};
// bfloat16: the upper half of a binary32, stored as its bits.
struct bfloat16 {
  std::uint16_t bits = 0;
};

inline float to_float(bfloat16 h) noexcept {
  std::uint32_t u = static_cast<std::uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest, ties to even; NaN stays NaN.
inline bfloat16 to_bfloat16(float f) noexcept {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bfloat16{static_cast<std::uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bfloat16{static_cast<std::uint16_t>(u >> 16)};
}

inline float to_float(float16 h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  std::uint32_t exp = (h.bits >> 10) & 0x1fu;
  std::uint32_t mant = h.bits & 0x3ffu;
  std::uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);  // inf or NaN
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    u = sign;  // signed zero
  } else {     // subnormal: normalize
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    u = sign | (static_cast<std::uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest, ties to even; overflow gives inf; NaN stays NaN.
inline float16 to_float16(float f) noexcept {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return float16{static_cast<std::uint16_t>(sign | 0x7e00u)};  // NaN
  if (abs >= 0x477ff000u) return float16{static_cast<std::uint16_t>(sign | 0x7c00u)};  // inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    if (abs < 0x33000000u) return float16{sign};  // below half the smallest subnormal
    const std::uint32_t exp = abs >> 23;
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exp;  // 14..24
    std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return float16{static_cast<std::uint16_t>(sign | half)};
  }
  std::uint32_t v = abs - 0x38000000u;  // rebias exponent 127 -> 15
  v += 0xfffu + ((v >> 13) & 1u);
  return float16{static_cast<std::uint16_t>(sign | (v >> 13))};
}

// Calls fn(T{}) with T the element type of t (std::int8_t ... float16, bfloat16, float, double)
// and returns what it returns: the one place a DataType becomes a C++ type. Throws
// InvalidArgument for a value that is not a DataType.
template <class Fn>
decltype(auto) visit_type(DataType t, Fn&& fn) {
  switch (t) {
    case DataType::int8: return fn(std::int8_t{});
    case DataType::uint8: return fn(std::uint8_t{});
    case DataType::int16: return fn(std::int16_t{});
    case DataType::uint16: return fn(std::uint16_t{});
    case DataType::int32: return fn(std::int32_t{});
    case DataType::uint32: return fn(std::uint32_t{});
    case DataType::int64: return fn(std::int64_t{});
    case DataType::uint64: return fn(std::uint64_t{});
    case DataType::float16: return fn(float16{});
    case DataType::bfloat16: return fn(bfloat16{});
    case DataType::float32: return fn(float{});
    case DataType::float64: return fn(double{});
  }
  throw Error(ErrorCode::InvalidArgument,
              "visit_type: " + std::to_string(static_cast<int>(t)) + " is not a DataType");
}

template <class T>
struct DataTypeOf;
template <> struct DataTypeOf<std::int8_t> { static constexpr DataType value = DataType::int8; };
template <> struct DataTypeOf<std::uint8_t> { static constexpr DataType value = DataType::uint8; };
template <> struct DataTypeOf<std::int16_t> { static constexpr DataType value = DataType::int16; };
template <> struct DataTypeOf<std::uint16_t> { static constexpr DataType value = DataType::uint16; };
template <> struct DataTypeOf<std::int32_t> { static constexpr DataType value = DataType::int32; };
template <> struct DataTypeOf<std::uint32_t> { static constexpr DataType value = DataType::uint32; };
template <> struct DataTypeOf<std::int64_t> { static constexpr DataType value = DataType::int64; };
template <> struct DataTypeOf<std::uint64_t> { static constexpr DataType value = DataType::uint64; };
template <> struct DataTypeOf<float16> { static constexpr DataType value = DataType::float16; };
template <> struct DataTypeOf<bfloat16> { static constexpr DataType value = DataType::bfloat16; };
template <> struct DataTypeOf<float> { static constexpr DataType value = DataType::float32; };
template <> struct DataTypeOf<double> { static constexpr DataType value = DataType::float64; };

// The DataType of a C++ element type: data_type_of<float>() == DataType::float32.
template <class T>
constexpr DataType data_type_of() noexcept {
  return DataTypeOf<std::remove_cv_t<T>>::value;
}

}  // namespace synk
