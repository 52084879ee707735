// See nccl_backend.h. Buffer conventions are NCCL's own (synk/communicator.h), so in-place calls
// pass straight through; gather, gatherv, scatter, scatterv and all_to_all(v) are
// point-to-point sends in one NCCL group.
#include "backends/nccl/nccl_backend.h"

#include <string>
#include <vector>

#include "backends/nccl/nccl_comm.h"
#include "backends/nccl/nccl_types.h"
#include "core/byte_offset.h"
#include "core/memory_kind.h"

namespace synk::detail {

namespace {

// NCCL takes device (or managed) memory only; a host pointer would fault on the device. Why
// `p` is not such memory, or empty.
// Memory of another device than the communicator's is refused too: without peer access the
// NCCL kernel's touch of it is an illegal address, which loses the rank's CUDA context.
std::string device_buffer_problem(const char* name, const void* p, int nccl_device) {
  if (p == nullptr) return {};
  cudaPointerAttributes attr{};
  const cudaError_t rc = cudaPointerGetAttributes(&attr, p);
  if (rc == cudaSuccess && attr.type == cudaMemoryTypeDevice && attr.device != nccl_device) {
    return std::string(name) + " is memory of CUDA device " + std::to_string(attr.device) +
           ", but this communicator's NCCL runs on device " + std::to_string(nccl_device) +
           " (copy it there first; DeviceShared does)";
  }
  if (rc == cudaSuccess &&
      (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged)) {
    return {};
  }
  if (rc != cudaSuccess) cudaGetLastError();
  return std::string(name) +
         " is not CUDA device memory; the nccl backend takes device buffers (use "
         "SYNK_BACKEND=auto, shm or mpi for host buffers)";
}

// On an H100 with NCCL 2.28.3, a one-rank out-of-place ncclAvg of 4,097 float32 elements left the
// last one unwritten (all_reduce, reduce and reduce_scatter; tests/nccl/raw_avg_one_rank.cc shows
// it without synk). The average over one rank is the input whatever NCCL's version: it is copied
// (nothing in place) instead. Returns whether it was.
bool copied_one_rank_average(const CommContext& ctx, const CollArgs& a, cudaStream_t stream) {
  if (ctx.size != 1 || a.op != ReduceOp::avg) return false;
  if (a.count > 0 && a.send != a.recv) {
    SYNK_CHECK_CUDA(cudaMemcpyAsync(a.recv, a.send, a.count * size_of(a.dtype),
                                    cudaMemcpyDeviceToDevice, stream));
  }
  return true;
}

}  // namespace

// One call's scope: the communicator is usable, its device is current, the stream is chosen.
#define SYNK_NCCL_BEGIN(op)                        \
  comm_->check_usable(op);                         \
  DeviceGuard synk_device_guard_(comm_->device()); \
  const cudaStream_t stream = comm_->stream_for(a.stream)

// An NCCL call on the communicator; ncclInProgress (non-blocking mode) is waited out.
#define SYNK_NCCL_ISSUE(op, expr) comm_->issue(op, #expr, (expr))

NcclBackend::NcclBackend(const CommContext& ctx) : ctx_(ctx), comm_(bootstrap_nccl(ctx)) {}

int NcclBackend::device() const { return comm_->device(); }

// The buffers each rank's part of a call reads or writes: all must be device memory. Checked
// before validation (Backend::buffer_error), not in each call: a host buffer on one rank only
// left the others in an NCCL kernel until SYNK_TIMEOUT; under SYNK_CHECK_CALLS they now fail too.
std::string NcclBackend::buffer_error(const CollArgs& a) const {
  if (uses_op(a.coll)) {
    if (std::string why = nccl_cannot_reduce(a.dtype); !why.empty()) return why;
  }
  const CallBuffers buffers = call_buffers(a, ctx_.rank);
  for (int i = 0; i < buffers.n; ++i) {
    std::string why = device_buffer_problem(buffers.at[i].name, buffers.at[i].p, comm_->device());
    if (!why.empty()) return why;
  }
  return {};
}

NcclBackend::~NcclBackend() = default;

Request NcclBackend::all_reduce(const CollArgs& a) {
  SYNK_NCCL_BEGIN("all_reduce");
  if (copied_one_rank_average(ctx_, a, stream)) return comm_->finish("all_reduce", stream, comm_);
  SYNK_NCCL_ISSUE("all_reduce", ncclAllReduce(a.send, a.recv, a.count, nccl_type(a.dtype),
                                              nccl_op(a.op, "all_reduce"), comm_->get(), stream));
  return comm_->finish("all_reduce", stream, comm_);
}

Request NcclBackend::reduce(const CollArgs& a) {
  SYNK_NCCL_BEGIN("reduce");
  if (copied_one_rank_average(ctx_, a, stream)) return comm_->finish("reduce", stream, comm_);
  void* recv = ctx_.rank == a.root ? a.recv : nullptr;  // NCCL reads recv at the root only
  SYNK_NCCL_ISSUE("reduce", ncclReduce(a.send, recv, a.count, nccl_type(a.dtype),
                                       nccl_op(a.op, "reduce"), a.root, comm_->get(), stream));
  return comm_->finish("reduce", stream, comm_);
}

Request NcclBackend::broadcast(const CollArgs& a) {
  SYNK_NCCL_BEGIN("broadcast");
  SYNK_NCCL_ISSUE("broadcast", ncclBroadcast(a.recv, a.recv, a.count, nccl_type(a.dtype), a.root,
                                             comm_->get(), stream));
  return comm_->finish("broadcast", stream, comm_);
}

Request NcclBackend::all_gather(const CollArgs& a) {
  SYNK_NCCL_BEGIN("all_gather");
  SYNK_NCCL_ISSUE("all_gather",
                  ncclAllGather(a.send, a.recv, a.count, nccl_type(a.dtype), comm_->get(), stream));
  return comm_->finish("all_gather", stream, comm_);
}

Request NcclBackend::reduce_scatter(const CollArgs& a) {
  SYNK_NCCL_BEGIN("reduce_scatter");
  if (copied_one_rank_average(ctx_, a, stream))
    return comm_->finish("reduce_scatter", stream, comm_);
  SYNK_NCCL_ISSUE("reduce_scatter",
                  ncclReduceScatter(a.send, a.recv, a.count, nccl_type(a.dtype),
                                    nccl_op(a.op, "reduce_scatter"), comm_->get(), stream));
  return comm_->finish("reduce_scatter", stream, comm_);
}

Request NcclBackend::gather(const CollArgs& a) {
  // gather is gatherv with equal counts (a.coll stays gather: its errors name it).
  const std::vector<std::size_t> counts(static_cast<std::size_t>(ctx_.size), a.count);
  CollArgs v = a;
  v.counts = counts;
  return gatherv(v);
}

// The root's side of gatherv and scatterv: in one NCCL group, post(r, displ, n) (an ncclRecv
// or ncclSend, named `call` in errors, its ncclResult_t as an int: the header has no NCCL) for
// every other rank's block of n > 0 elements at displacement displ. Returns the root's own
// displacement.
std::size_t NcclBackend::grouped_blocks(
    const CollArgs& a, const char* op, const char* call,
    const std::function<int(int, std::size_t, std::size_t)>& post) {
  std::size_t displ = 0, own_displ = 0;
  SYNK_NCCL_ISSUE(op, ncclGroupStart());
  for (int r = 0; r < ctx_.size; ++r) {
    const std::size_t n = a.counts[static_cast<std::size_t>(r)];
    if (r == ctx_.rank) {
      own_displ = displ;
    } else if (n > 0) {
      // NCCL reports errors of grouped calls at ncclGroupEnd; end the group before any throw.
      const auto rc = static_cast<ncclResult_t>(post(r, displ, n));
      if (rc != ncclSuccess && rc != ncclInProgress) {
        ncclGroupEnd();
        comm_->issue(op, call, rc);
      }
    }
    displ += n;
  }
  SYNK_NCCL_ISSUE(op, ncclGroupEnd());
  return own_displ;
}

Request NcclBackend::gatherv(const CollArgs& a) {
  const char* op = a.coll == Collective::gather ? "gather" : "gatherv";
  SYNK_NCCL_BEGIN(op);
  const ncclDataType_t t = nccl_type(a.dtype);
  const std::size_t es = size_of(a.dtype);
  if (ctx_.rank != a.root) {
    if (a.count > 0)
      SYNK_NCCL_ISSUE(op, ncclSend(a.send, a.count, t, a.root, comm_->get(), stream));
    return comm_->finish(op, stream, comm_);
  }
  const std::size_t own_displ =
      grouped_blocks(a, op, "ncclRecv(recv + displ, n, dtype, r, comm, stream)",
                     [&](int r, std::size_t displ, std::size_t n) {
                       return ncclRecv(at(a.recv, displ * es), n, t, r, comm_->get(), stream);
                     });
  void* own = at(a.recv, own_displ * es);
  if (a.count > 0 && own != a.send) {  // in place: the root's block is already where it goes
    SYNK_CHECK_CUDA(cudaMemcpyAsync(own, a.send, a.count * es, cudaMemcpyDeviceToDevice, stream));
  }
  return comm_->finish(op, stream, comm_);
}

Request NcclBackend::scatter(const CollArgs& a) {
  // scatter is scatterv with equal counts.
  const std::vector<std::size_t> counts(static_cast<std::size_t>(ctx_.size), a.count);
  CollArgs v = a;
  v.coll = Collective::scatterv;
  v.counts = counts;
  return scatterv(v, "scatter");
}

Request NcclBackend::scatterv(const CollArgs& a) { return scatterv(a, "scatterv"); }

Request NcclBackend::scatterv(const CollArgs& a, const char* op) {
  SYNK_NCCL_BEGIN(op);
  const ncclDataType_t t = nccl_type(a.dtype);
  const std::size_t es = size_of(a.dtype);
  if (ctx_.rank != a.root) {
    if (a.count > 0)
      SYNK_NCCL_ISSUE(op, ncclRecv(a.recv, a.count, t, a.root, comm_->get(), stream));
    return comm_->finish(op, stream, comm_);
  }
  const std::size_t own_displ =
      grouped_blocks(a, op, "ncclSend(send + displ, n, dtype, r, comm, stream)",
                     [&](int r, std::size_t displ, std::size_t n) {
                       return ncclSend(at(a.send, displ * es), n, t, r, comm_->get(), stream);
                     });
  const void* own = at(a.send, own_displ * es);
  if (a.count > 0 && own != a.recv) {  // in place: recv is the root's block of send
    SYNK_CHECK_CUDA(cudaMemcpyAsync(a.recv, own, a.count * es, cudaMemcpyDeviceToDevice, stream));
  }
  return comm_->finish(op, stream, comm_);
}

Request NcclBackend::all_to_all(const CollArgs& a) {
  // all_to_all is all_to_allv with equal counts, as gather is gatherv.
  const std::vector<std::size_t> counts(static_cast<std::size_t>(ctx_.size), a.count);
  CollArgs v = a;
  v.counts = counts;
  v.recv_counts = counts;
  return all_to_allv(v, "all_to_all");
}

Request NcclBackend::all_to_allv(const CollArgs& a) { return all_to_allv(a, "all_to_allv"); }

// One NCCL group of a send and a receive per peer with each pair's count, at the displacements
// the counts make, as nccl-tests' alltoall; the own block is a device copy.
Request NcclBackend::all_to_allv(const CollArgs& a, const char* op) {
  SYNK_NCCL_BEGIN(op);
  const ncclDataType_t t = nccl_type(a.dtype);
  const std::size_t es = size_of(a.dtype);
  std::size_t send_displ = 0, recv_displ = 0, own_send = 0, own_recv = 0;
  SYNK_NCCL_ISSUE(op, ncclGroupStart());
  for (int r = 0; r < ctx_.size; ++r) {
    const std::size_t sc = a.counts[static_cast<std::size_t>(r)];
    const std::size_t rc = a.recv_counts[static_cast<std::size_t>(r)];
    if (r == ctx_.rank) {
      own_send = send_displ;
      own_recv = recv_displ;
    } else {
      const char* call = "ncclSend(send + displ, send_counts[r], dtype, r, comm, stream)";
      ncclResult_t result = ncclSuccess;
      if (sc > 0) result = ncclSend(at(a.send, send_displ * es), sc, t, r, comm_->get(), stream);
      if ((result == ncclSuccess || result == ncclInProgress) && rc > 0) {
        call = "ncclRecv(recv + displ, recv_counts[r], dtype, r, comm, stream)";
        result = ncclRecv(at(a.recv, recv_displ * es), rc, t, r, comm_->get(), stream);
      }
      if (result != ncclSuccess && result != ncclInProgress) {  // end the group before the throw
        ncclGroupEnd();
        comm_->issue(op, call, result);
      }
    }
    send_displ += sc;
    recv_displ += rc;
  }
  SYNK_NCCL_ISSUE(op, ncclGroupEnd());
  const std::size_t own = a.counts[static_cast<std::size_t>(ctx_.rank)];
  if (own > 0) {
    SYNK_CHECK_CUDA(cudaMemcpyAsync(at(a.recv, own_recv * es), at(a.send, own_send * es),
                                    own * es, cudaMemcpyDeviceToDevice, stream));
  }
  return comm_->finish(op, stream, comm_);
}

// A one-element all_reduce: it completes on a rank only after every rank has joined it.
Request NcclBackend::barrier() {
  const CollArgs a;  // own stream
  SYNK_NCCL_BEGIN("barrier");
  SYNK_NCCL_ISSUE("barrier", ncclAllReduce(comm_->scratch(), comm_->scratch(), 1, ncclInt32,
                                           ncclSum, comm_->get(), stream));
  return comm_->finish("barrier", stream, comm_);
}

}  // namespace synk::detail
