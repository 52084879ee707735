// The MPI datatype and reduction op of a synk DataType and ReduceOp, shared by the backends
// that call MPI (mpi, hier).
#pragma once

#include <mpi.h>

#include "synk/types.h"

namespace synk::detail {

// float16 and bfloat16 map to MPI_UINT16_T: MPI can move them but not reduce them.
inline MPI_Datatype mpi_datatype(DataType t) {
  switch (t) {
    case DataType::int8: return MPI_INT8_T;
    case DataType::uint8: return MPI_UINT8_T;
    case DataType::int16: return MPI_INT16_T;
    case DataType::uint16: return MPI_UINT16_T;
    case DataType::int32: return MPI_INT32_T;
    case DataType::uint32: return MPI_UINT32_T;
    case DataType::int64: return MPI_INT64_T;
    case DataType::uint64: return MPI_UINT64_T;
    case DataType::float16:
    case DataType::bfloat16: return MPI_UINT16_T;
    case DataType::float32: return MPI_FLOAT;
    case DataType::float64: return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

// avg maps to MPI_SUM: the caller scales by 1/n afterwards.
inline MPI_Op mpi_reduce_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return MPI_SUM;
    case ReduceOp::prod: return MPI_PROD;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::max: return MPI_MAX;
  }
  return MPI_OP_NULL;
}

}  // namespace synk::detail
