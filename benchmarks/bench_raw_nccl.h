// synk-bench --baseline nccl: the raw NCCL call beside synk's nccl rows, on the same device
// buffers, on an NCCL communicator of its own (unique id over MPI, as nccl-tests starts one),
// waited for with cudaStreamSynchronize as synk's blocking call waits for its own.
#pragma once

#include <mpi.h>

#include <memory>

#include "bench_colls.h"

namespace synk::bench {

class RawNccl {
 public:
  // Collective over `comm`: one NCCL rank per MPI rank, on CUDA device `device`. Throws
  // synk::Error(NotSupported) in a build without NCCL, std::runtime_error when CUDA or NCCL fail.
  static std::unique_ptr<RawNccl> create(MPI_Comm comm, int device);
  virtual ~RawNccl() = default;
  // The collective `a` describes (device buffers) through NCCL's own call: ncclAllReduce,
  // ncclBroadcast, ncclReduce, ncclAllGather, ncclReduceScatter, and for gather and scatter
  // ncclSend/ncclRecv in one group (nccl-tests' way); returns once the stream has finished it.
  virtual void call(const CallArgs& a) = 0;
};

}  // namespace synk::bench
