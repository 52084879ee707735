// An LD_PRELOAD stand-in for the NCCL calls synk makes, over MPI, for machines without a GPU.
// Test-only, loaded with fake_cuda_device.cc (whose "device memory" is host memory): a
// communicator is a duplicate of MPI_COMM_WORLD (nranks must be the world's size), and each
// collective runs at once with MPI after the work queued on its stream, checking first that its
// buffers are fake device memory, as NCCL's kernels would fault on anything else; sends and
// receives of a group run at its ncclGroupEnd; float16 and bfloat16 reductions gather every
// input and reduce in float. fp8 types are not faked: they return ncclInvalidUsage.
#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fake_cuda_device.h"
#include "synk/types.h"

struct ncclComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
};

namespace {

std::string last_error;

ncclResult_t fail(ncclResult_t rc, const std::string& why) {
  last_error = "fake NCCL: " + why;
  return rc;
}

bool mpi_type(ncclDataType_t t, MPI_Datatype* out) {
  switch (t) {
    case ncclInt8:
      *out = MPI_INT8_T;
      return true;
    case ncclUint8:
      *out = MPI_UINT8_T;
      return true;
    case ncclInt32:
      *out = MPI_INT32_T;
      return true;
    case ncclUint32:
      *out = MPI_UINT32_T;
      return true;
    case ncclInt64:
      *out = MPI_INT64_T;
      return true;
    case ncclUint64:
      *out = MPI_UINT64_T;
      return true;
    case ncclFloat32:
      *out = MPI_FLOAT;
      return true;
    case ncclFloat64:
      *out = MPI_DOUBLE;
      return true;
    case ncclFloat16:
    case ncclBfloat16:
      *out = MPI_UINT16_T;  // moved as bits; reduced by half_reduce, not by MPI
      return true;
    default:
      return false;  // fp8: not faked
  }
}

bool is_half(ncclDataType_t t) { return t == ncclFloat16 || t == ncclBfloat16; }

float half_to_float(std::uint16_t bits, ncclDataType_t t) {
  return t == ncclFloat16 ? synk::to_float(synk::float16{bits}) : synk::to_float(synk::bfloat16{bits});
}
std::uint16_t float_to_half(float f, ncclDataType_t t) {
  return t == ncclFloat16 ? synk::to_float16(f).bits : synk::to_bfloat16(f).bits;
}

std::size_t type_size(MPI_Datatype t) {
  int n = 0;
  MPI_Type_size(t, &n);
  return static_cast<std::size_t>(n);
}

bool mpi_op(ncclRedOp_t op, MPI_Op* out) {
  switch (op) {
    case ncclSum:
    case ncclAvg:
      *out = MPI_SUM;
      return true;
    case ncclProd:
      *out = MPI_PROD;
      return true;
    case ncclMin:
      *out = MPI_MIN;
      return true;
    case ncclMax:
      *out = MPI_MAX;
      return true;
    default:
      return false;
  }
}

// ncclAvg: the sum divided by the number of ranks (floating types only, as in NCCL).
void divide(void* buf, std::size_t count, MPI_Datatype t, int n) {
  if (t == MPI_FLOAT) {
    float* p = static_cast<float*>(buf);
    for (std::size_t i = 0; i < count; ++i) p[i] /= static_cast<float>(n);
  } else if (t == MPI_DOUBLE) {
    double* p = static_cast<double*>(buf);
    for (std::size_t i = 0; i < count; ++i) p[i] /= n;
  }
}

// Collectives and point-to-point calls begun, for synk_fake_nccl_calls().
long collectives = 0;
// synk_fake_nccl_stall_next(): the next call queues work that never ends, and runs nothing.
bool stall_next = false;
// What begin() returns for that call: the collective returns ncclSuccess (it was queued) at once.
constexpr ncclResult_t kStalled = ncclNumResults;

ncclResult_t queued(ncclResult_t rc) { return rc == kStalled ? ncclSuccess : rc; }

// The common checks of a collective; on success the stream's earlier work has run.
ncclResult_t begin(const char* call, ncclComm_t comm, ncclDataType_t dtype, std::size_t count,
                   cudaStream_t stream, MPI_Datatype* t) {
  if (!comm || comm->comm == MPI_COMM_NULL)
    return fail(ncclInvalidArgument, std::string(call) + ": no communicator");
  if (!mpi_type(dtype, t))
    return fail(ncclInvalidUsage, std::string(call) + ": data type not faked");
  if (count > 0x7fffffff)
    return fail(ncclInvalidUsage, std::string(call) + ": count above INT_MAX not faked");
  synk_fake_cuda_flush(stream);
  ++collectives;
  if (stall_next) {
    stall_next = false;
    synk_fake_cuda_stall(stream);
    return kStalled;
  }
  return ncclSuccess;
}

ncclResult_t device(const char* call, const char* name, const void* p, std::size_t bytes) {
  if (bytes == 0 || synk_fake_cuda_is_device(p, bytes)) return ncclSuccess;
  return fail(ncclInvalidArgument, std::string(call) + ": " + name + " is not device memory");
}

ncclResult_t mpi(int rc, const char* call) {
  return rc == MPI_SUCCESS ? ncclSuccess
                           : fail(ncclSystemError, std::string(call) + ": MPI failed");
}

// float16 and bfloat16, which MPI cannot reduce: every rank gathers every rank's input and
// reduces elements [first, first + n_out) in float, in rank order, rounding once into out. (NCCL
// may round differently; the tests' values are small integers, exact either way.)
ncclResult_t half_reduce(const void* send, std::size_t count, ncclDataType_t dtype,
                         ncclRedOp_t op, ncclComm_t comm, std::size_t first, std::size_t n_out,
                         void* out) {
  const std::size_t size = static_cast<std::size_t>(comm->size);
  std::vector<std::uint16_t> all(count * size);
  if (ncclResult_t rc = mpi(MPI_Allgather(send, static_cast<int>(count), MPI_UINT16_T, all.data(),
                                          static_cast<int>(count), MPI_UINT16_T, comm->comm),
                            "half_reduce"))
    return rc;
  auto* o = static_cast<std::uint16_t*>(out);
  for (std::size_t i = 0; i < n_out; ++i) {
    float acc = half_to_float(all[first + i], dtype);
    for (std::size_t r = 1; r < size; ++r) {
      const float v = half_to_float(all[r * count + first + i], dtype);
      if (op == ncclProd) acc *= v;
      else if (op == ncclMin) acc = v < acc ? v : acc;
      else if (op == ncclMax) acc = v > acc ? v : acc;
      else acc += v;
    }
    if (op == ncclAvg) acc /= static_cast<float>(size);
    o[i] = float_to_half(acc, dtype);
  }
  return ncclSuccess;
}

struct P2p {
  bool send;
  void* buf;
  int count;
  MPI_Datatype type;
  int peer;
  MPI_Comm comm;
};
int group_depth = 0;
std::vector<P2p> pending;

ncclResult_t run_p2p() {
  std::vector<MPI_Request> reqs(pending.size(), MPI_REQUEST_NULL);
  int rc = MPI_SUCCESS;
  for (std::size_t i = 0; i < pending.size() && rc == MPI_SUCCESS; ++i) {
    const P2p& p = pending[i];
    rc = p.send ? MPI_Isend(p.buf, p.count, p.type, p.peer, 0, p.comm, &reqs[i])
                : MPI_Irecv(p.buf, p.count, p.type, p.peer, 0, p.comm, &reqs[i]);
  }
  if (rc == MPI_SUCCESS) {
    rc = MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  }
  pending.clear();
  return mpi(rc, "ncclGroupEnd (the group's sends and receives)");
}

ncclResult_t p2p(const char* call, bool send, void* buf, std::size_t count, ncclDataType_t dtype,
                 int peer, ncclComm_t comm, cudaStream_t stream) {
  MPI_Datatype t;
  if (ncclResult_t rc = begin(call, comm, dtype, count, stream, &t))
    return queued(rc);
  if (peer < 0 || peer >= comm->size) return fail(ncclInvalidArgument, std::string(call) + ": bad peer");
  if (ncclResult_t rc = device(call, send ? "sendbuff" : "recvbuff", buf, count * type_size(t)))
    return rc;
  pending.push_back(P2p{send, buf, static_cast<int>(count), t, peer, comm->comm});
  return group_depth > 0 ? ncclSuccess : run_p2p();
}

}  // namespace

extern "C" {

// The number of collectives (and sends and receives) begun in this process: a test finds it with
// dlsym to see which calls went through NCCL.
long synk_fake_nccl_calls() { return collectives; }

// The next collective (or send or receive) of this process never ends on its stream, as a peer
// that never comes would leave it: for the tests of synk's deadlines. Call it on every rank.
void synk_fake_nccl_stall_next() { stall_next = true; }

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t rc) {
  return rc == ncclSuccess ? "no error" : "fake NCCL error";
}

const char* ncclGetLastError(ncclComm_t) { return last_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, "synk-fake-nccl", 14);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  (void)config;
  if (std::memcmp(id.internal, "synk-fake-nccl", 14) != 0)
    return fail(ncclInvalidArgument, "the unique id is not the fake's");
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (nranks != world_size || rank != world_rank)
    return fail(ncclInvalidUsage, "only communicators over MPI_COMM_WORLD are faked");
  ncclComm* c = new ncclComm;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &c->comm) != MPI_SUCCESS) {
    delete c;
    return fail(ncclSystemError, "MPI_Comm_dup failed");
  }
  c->rank = rank;
  c->size = nranks;
  *out = c;
  return ncclSuccess;
}

// The blocking init (synk-bench's raw NCCL baseline uses it, as nccl-tests does).
ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(out, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* state) {
  *state = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm->comm != MPI_COMM_NULL) MPI_Comm_free(&comm->comm);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclAllReduce(const void* send, void* recv, std::size_t count, ncclDataType_t dtype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  MPI_Datatype t;
  MPI_Op o;
  if (ncclResult_t rc = begin("ncclAllReduce", comm, dtype, count, stream, &t))
    return queued(rc);
  if (!mpi_op(op, &o)) return fail(ncclInvalidUsage, "ncclAllReduce: op not faked");
  const std::size_t bytes = count * type_size(t);
  if (ncclResult_t rc = device("ncclAllReduce", "sendbuff", send, bytes)) return rc;
  if (ncclResult_t rc = device("ncclAllReduce", "recvbuff", recv, bytes)) return rc;
  if (is_half(dtype)) return half_reduce(send, count, dtype, op, comm, 0, count, recv);
  const int n = static_cast<int>(count);
  if (ncclResult_t rc =
          mpi(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, n, t, o, comm->comm),
              "ncclAllReduce"))
    return rc;
  if (op == ncclAvg) divide(recv, count, t, comm->size);
  return ncclSuccess;
}

ncclResult_t ncclReduce(const void* send, void* recv, std::size_t count, ncclDataType_t dtype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  MPI_Datatype t;
  MPI_Op o;
  if (ncclResult_t rc = begin("ncclReduce", comm, dtype, count, stream, &t))
    return queued(rc);
  if (!mpi_op(op, &o)) return fail(ncclInvalidUsage, "ncclReduce: op not faked");
  const std::size_t bytes = count * type_size(t);
  const bool at_root = comm->rank == root;
  if (ncclResult_t rc = device("ncclReduce", "sendbuff", send, bytes)) return rc;
  if (at_root) {
    if (ncclResult_t rc = device("ncclReduce", "recvbuff", recv, bytes)) return rc;
  }
  if (is_half(dtype)) {
    std::vector<std::uint16_t> out(count);
    if (ncclResult_t rc = half_reduce(send, count, dtype, op, comm, 0, count, out.data())) return rc;
    if (at_root && count) std::memcpy(recv, out.data(), bytes);
    return ncclSuccess;
  }
  const void* s = at_root && send == recv ? MPI_IN_PLACE : send;
  if (ncclResult_t rc = mpi(
          MPI_Reduce(s, at_root ? recv : nullptr, static_cast<int>(count), t, o, root, comm->comm),
          "ncclReduce"))
    return rc;
  if (op == ncclAvg && at_root) divide(recv, count, t, comm->size);
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, std::size_t count, ncclDataType_t dtype,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  MPI_Datatype t;
  if (ncclResult_t rc = begin("ncclBroadcast", comm, dtype, count, stream, &t))
    return queued(rc);
  const std::size_t bytes = count * type_size(t);
  if (comm->rank == root) {
    if (ncclResult_t rc = device("ncclBroadcast", "sendbuff", send, bytes)) return rc;
  }
  if (ncclResult_t rc = device("ncclBroadcast", "recvbuff", recv, bytes)) return rc;
  if (comm->rank == root && send != recv && bytes) std::memcpy(recv, send, bytes);
  return mpi(MPI_Bcast(recv, static_cast<int>(count), t, root, comm->comm), "ncclBroadcast");
}

ncclResult_t ncclAllGather(const void* send, void* recv, std::size_t count, ncclDataType_t dtype,
                           ncclComm_t comm, cudaStream_t stream) {
  MPI_Datatype t;
  if (ncclResult_t rc = begin("ncclAllGather", comm, dtype, count, stream, &t))
    return queued(rc);
  const std::size_t bytes = count * type_size(t);
  if (ncclResult_t rc = device("ncclAllGather", "sendbuff", send, bytes)) return rc;
  if (ncclResult_t rc =
          device("ncclAllGather", "recvbuff", recv, bytes * static_cast<std::size_t>(comm->size)))
    return rc;
  const bool in_place =
      send == static_cast<const char*>(recv) + bytes * static_cast<std::size_t>(comm->rank);
  const int n = static_cast<int>(count);
  return mpi(MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, t, recv, n, t, comm->comm),
             "ncclAllGather");
}

// Groups of point-to-point calls (synk's gather, gatherv and scatter): the sends and receives
// of a group are posted together at ncclGroupEnd (MPI_Isend/MPI_Irecv, then MPI_Waitall), so
// their order within the group does not matter, as in NCCL. A call outside a group runs alone.
ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  return --group_depth == 0 ? run_p2p() : ncclSuccess;
}

ncclResult_t ncclSend(const void* send, std::size_t count, ncclDataType_t dtype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return p2p("ncclSend", true, const_cast<void*>(send), count, dtype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recv, std::size_t count, ncclDataType_t dtype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return p2p("ncclRecv", false, recv, count, dtype, peer, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, std::size_t count,
                               ncclDataType_t dtype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  MPI_Datatype t;
  MPI_Op o;
  if (ncclResult_t rc = begin("ncclReduceScatter", comm, dtype, count, stream, &t))
    return queued(rc);
  if (!mpi_op(op, &o)) return fail(ncclInvalidUsage, "ncclReduceScatter: op not faked");
  const std::size_t bytes = count * type_size(t);
  if (ncclResult_t rc = device("ncclReduceScatter", "sendbuff", send,
                               bytes * static_cast<std::size_t>(comm->size)))
    return rc;
  if (ncclResult_t rc = device("ncclReduceScatter", "recvbuff", recv, bytes)) return rc;
  if (is_half(dtype)) {
    std::vector<std::uint16_t> out(count);
    if (ncclResult_t rc = half_reduce(send, count * static_cast<std::size_t>(comm->size), dtype,
                                      op, comm, static_cast<std::size_t>(comm->rank) * count,
                                      count, out.data()))
      return rc;
    if (count) std::memcpy(recv, out.data(), bytes);
    return ncclSuccess;
  }
  // In place, recv is rank's block of send: reduce into a separate buffer, then copy.
  std::vector<unsigned char> out(bytes);
  if (ncclResult_t rc = mpi(MPI_Reduce_scatter_block(send, out.data(), static_cast<int>(count), t,
                                                     o, comm->comm),
                            "ncclReduceScatter"))
    return rc;
  if (bytes) std::memcpy(recv, out.data(), bytes);
  if (op == ncclAvg) divide(recv, count, t, comm->size);
  return ncclSuccess;
}

}  // extern "C"
