// synk's DataType and ReduceOp as NCCL's enums; shared by the nccl backend and synk-bench's raw
// NCCL baseline, so that both make the same call.
#pragma once

#include <nccl.h>

#include <string>

#include "synk/error.h"
#include "synk/types.h"

namespace synk::detail {

inline ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::int8:
      return ncclInt8;
    case DataType::uint8:
      return ncclUint8;
    case DataType::int32:
      return ncclInt32;
    case DataType::uint32:
      return ncclUint32;
    case DataType::int64:
      return ncclInt64;
    case DataType::uint64:
      return ncclUint64;
    case DataType::float16:
    // NCCL has no 16-bit integers: it moves them as float16's bits, and the backend refuses to
    // reduce them (nccl_cannot_reduce).
    case DataType::int16:
    case DataType::uint16:
      return ncclFloat16;
    case DataType::bfloat16:
      return ncclBfloat16;
    case DataType::float32:
      return ncclFloat32;
    case DataType::float64:
      return ncclFloat64;
  }
  return ncclUint8;  // unreachable: the Communicator validated the type
}

// Why NCCL cannot reduce `t`, or "".
inline std::string nccl_cannot_reduce(DataType t) {
  if (t != DataType::int16 && t != DataType::uint16) return "";
  return std::string("NCCL has no ") + to_string(t) + " reduction: reduce int32 or float32 on "
         "the device, or " + to_string(t) + " in host memory";
}

inline ncclRedOp_t nccl_op(ReduceOp op, const char* coll) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::prod:
      return ncclProd;
    case ReduceOp::min:
      return ncclMin;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::avg:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
      return ncclAvg;
#else
      // Older NCCL has no ncclAvg; sum then scale would need a device kernel (nvcc).
      throw Error(ErrorCode::NotSupported,
                  std::string(coll) +
                      ": op avg needs NCCL >= 2.10 (ncclAvg); this build has NCCL " +
                      std::to_string(NCCL_VERSION_CODE));
#endif
  }
  (void)coll;
  return ncclSum;
}

}  // namespace synk::detail
