// Names, sizes and parsing of DataType and ReduceOp.
#include "synk/types.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace synk {

bool is_valid(DataType t) noexcept {
  const int v = static_cast<int>(t);
  return v >= 0 && v < kNumDataTypes;
}

bool is_valid(ReduceOp op) noexcept {
  const int v = static_cast<int>(op);
  return v >= 0 && v < kNumReduceOps;
}

bool is_floating(DataType t) noexcept {
  return t == DataType::float16 || t == DataType::bfloat16 || t == DataType::float32 ||
         t == DataType::float64;
}

const char* to_string(DataType t) noexcept {
  switch (t) {
    case DataType::int8: return "int8";
    case DataType::uint8: return "uint8";
    case DataType::int16: return "int16";
    case DataType::uint16: return "uint16";
    case DataType::int32: return "int32";
    case DataType::uint32: return "uint32";
    case DataType::int64: return "int64";
    case DataType::uint64: return "uint64";
    case DataType::float16: return "float16";
    case DataType::bfloat16: return "bfloat16";
    case DataType::float32: return "float32";
    case DataType::float64: return "float64";
  }
  return "invalid";
}

const char* to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "invalid";
}

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}
}  // namespace

std::optional<DataType> parse_data_type(std::string_view name) {
  const std::string n = lower(name);
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (n == to_string(static_cast<DataType>(i))) return static_cast<DataType>(i);
  }
  // The aliases nccl-tests and numpy users type.
  if (n == "char") return DataType::int8;
  if (n == "short") return DataType::int16;
  if (n == "int" || n == "int32_t") return DataType::int32;
  if (n == "half" || n == "fp16") return DataType::float16;
  if (n == "bf16") return DataType::bfloat16;
  if (n == "float" || n == "fp32") return DataType::float32;
  if (n == "double" || n == "fp64") return DataType::float64;
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  const std::string n = lower(name);
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (n == to_string(static_cast<ReduceOp>(i))) return static_cast<ReduceOp>(i);
  }
  // Horovod's names (Average, Product) and NumPy's (mean) for the same reductions.
  if (n == "mean" || n == "average") return ReduceOp::avg;
  if (n == "product") return ReduceOp::prod;
  return std::nullopt;
}

}  // namespace synk
