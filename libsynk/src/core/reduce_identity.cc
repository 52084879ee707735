// See reduce_identity.h.
#include "core/reduce_identity.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace synk::detail {

namespace {

template <class T>
void fill_as(void* dst, std::size_t count, T value) {
  std::fill_n(static_cast<T*>(dst), count, value);
}

// The identity of op for an arithmetic T (an integer, float or double).
template <class T>
T identity_of(ReduceOp op) {
  using L = std::numeric_limits<T>;
  switch (op) {
    case ReduceOp::prod: return T{1};
    case ReduceOp::min: return L::has_infinity ? L::infinity() : L::max();
    case ReduceOp::max: return L::has_infinity ? -L::infinity() : L::lowest();
    case ReduceOp::sum:
    case ReduceOp::avg: break;
  }
  return T{0};
}

// The bits of the identity of op in float16 (IEEE half) or bfloat16.
std::uint16_t half_identity(ReduceOp op, bool bfloat) {
  switch (op) {
    case ReduceOp::prod: return bfloat ? 0x3F80 : 0x3C00;  // 1
    case ReduceOp::min: return bfloat ? 0x7F80 : 0x7C00;   // +inf
    case ReduceOp::max: return bfloat ? 0xFF80 : 0xFC00;   // -inf
    case ReduceOp::sum:
    case ReduceOp::avg: break;
  }
  return 0;
}

}  // namespace

void fill_identity(void* dst, std::size_t count, DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::int8: return fill_as(dst, count, identity_of<std::int8_t>(op));
    case DataType::uint8: return fill_as(dst, count, identity_of<std::uint8_t>(op));
    case DataType::int16: return fill_as(dst, count, identity_of<std::int16_t>(op));
    case DataType::uint16: return fill_as(dst, count, identity_of<std::uint16_t>(op));
    case DataType::int32: return fill_as(dst, count, identity_of<std::int32_t>(op));
    case DataType::uint32: return fill_as(dst, count, identity_of<std::uint32_t>(op));
    case DataType::int64: return fill_as(dst, count, identity_of<std::int64_t>(op));
    case DataType::uint64: return fill_as(dst, count, identity_of<std::uint64_t>(op));
    case DataType::float32: return fill_as(dst, count, identity_of<float>(op));
    case DataType::float64: return fill_as(dst, count, identity_of<double>(op));
    case DataType::float16: return fill_as(dst, count, half_identity(op, false));
    case DataType::bfloat16: return fill_as(dst, count, half_identity(op, true));
  }
}

}  // namespace synk::detail
