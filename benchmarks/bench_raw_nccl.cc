// See bench_raw_nccl.h.
#include "bench_raw_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

#include "backends/nccl/nccl_types.h"

namespace synk::bench {
namespace {

void check_cuda(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) {
    throw std::runtime_error(std::string("raw NCCL baseline: ") + call + ": " +
                             cudaGetErrorString(rc));
  }
}

void check_nccl(ncclResult_t rc, const char* call) {
  if (rc != ncclSuccess) {
    throw std::runtime_error(std::string("raw NCCL baseline: ") + call + ": " +
                             ncclGetErrorString(rc));
  }
}

#define RAW_CUDA(expr) check_cuda((expr), #expr)
#define RAW_NCCL(expr) check_nccl((expr), #expr)

class RawNcclComm final : public RawNccl {
 public:
  RawNcclComm(MPI_Comm comm, int device) : device_(device) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    ncclUniqueId id{};
    if (rank_ == 0) RAW_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
    RAW_CUDA(cudaSetDevice(device_));
    RAW_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    RAW_NCCL(ncclCommInitRank(&comm_, size_, id, rank_));
  }
  ~RawNcclComm() override {
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  void call(const CallArgs& a) override {
    RAW_CUDA(cudaSetDevice(device_));
    enqueue(a);
    RAW_CUDA(cudaStreamSynchronize(stream_));
  }

 private:
  void enqueue(const CallArgs& base) {
    const CallArgs a = placed(base, rank_);
    const ncclDataType_t t = detail::nccl_type(a.dtype);
    const ncclRedOp_t op = detail::nccl_op(a.op, to_string(a.coll));
    const std::size_t n = a.layout.count;
    const std::size_t block = a.layout.block;
    switch (a.coll) {
      case Coll::allreduce:
        return RAW_NCCL(ncclAllReduce(a.send, a.recv, n, t, op, comm_, stream_));
      case Coll::broadcast:
        return RAW_NCCL(ncclBroadcast(a.recv, a.recv, n, t, a.root, comm_, stream_));
      case Coll::reduce:
        return RAW_NCCL(ncclReduce(a.send, a.recv, n, t, op, a.root, comm_, stream_));
      case Coll::allgather:
        return RAW_NCCL(ncclAllGather(a.send, a.recv, block, t, comm_, stream_));
      case Coll::reduce_scatter:
        return RAW_NCCL(ncclReduceScatter(a.send, a.recv, block, t, op, comm_, stream_));
      case Coll::gather:
      case Coll::scatter:
        return point_to_point(a, t);
      case Coll::alltoall:
        return all_to_all(a, t);
    }
  }

  // A send and a receive of a block with every rank, itself too, in one group (nccl-tests'
  // alltoall).
  void all_to_all(const CallArgs& a, ncclDataType_t t) {
    const std::size_t block = a.layout.block;
    const std::size_t block_bytes = a.layout.bytes / static_cast<std::size_t>(size_);
    RAW_NCCL(ncclGroupStart());
    for (int r = 0; r < size_; ++r) {
      const std::size_t at = static_cast<std::size_t>(r) * block_bytes;
      RAW_NCCL(ncclSend(static_cast<unsigned char*>(a.send) + at, block, t, r, comm_, stream_));
      RAW_NCCL(ncclRecv(static_cast<unsigned char*>(a.recv) + at, block, t, r, comm_, stream_));
    }
    RAW_NCCL(ncclGroupEnd());
  }

  // gather: every rank sends its block to the root, which receives block r at r * block;
  // scatter: the other way round.
  void point_to_point(const CallArgs& a, ncclDataType_t t) {
    const std::size_t block = a.layout.block;
    const std::size_t block_bytes = a.layout.bytes / static_cast<std::size_t>(size_);
    auto* root_buffer = static_cast<unsigned char*>(a.coll == Coll::gather ? a.recv : a.send);
    RAW_NCCL(ncclGroupStart());
    if (rank_ == a.root) {
      for (int r = 0; r < size_; ++r) {
        void* part = root_buffer + static_cast<std::size_t>(r) * block_bytes;
        if (a.coll == Coll::gather) {
          RAW_NCCL(ncclRecv(part, block, t, r, comm_, stream_));
        } else {
          RAW_NCCL(ncclSend(part, block, t, r, comm_, stream_));
        }
      }
    }
    if (a.coll == Coll::gather) {
      RAW_NCCL(ncclSend(a.send, block, t, a.root, comm_, stream_));
    } else {
      RAW_NCCL(ncclRecv(a.recv, block, t, a.root, comm_, stream_));
    }
    RAW_NCCL(ncclGroupEnd());
  }

  int device_;
  int rank_ = 0;
  int size_ = 1;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<RawNccl> RawNccl::create(MPI_Comm comm, int device) {
  return std::make_unique<RawNcclComm>(comm, device);
}

}  // namespace synk::bench
