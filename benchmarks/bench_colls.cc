// See bench_colls.h.
#include "bench_colls.h"

#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

namespace synk::bench {

namespace {

constexpr Coll kAllColls[] = {Coll::allreduce,      Coll::broadcast, Coll::reduce, Coll::allgather,
                              Coll::reduce_scatter, Coll::gather,    Coll::scatter, Coll::alltoall};

// MPI's type for moving (and, when reducible, reducing) dtype; float16 and bfloat16 move as
// their 16 bits but cannot be reduced by MPI.
MPI_Datatype mpi_type(DataType t, bool reduces) {
  switch (t) {
    case DataType::int8:
      return MPI_INT8_T;
    case DataType::uint8:
      return MPI_UINT8_T;
    case DataType::int16:
      return MPI_INT16_T;
    case DataType::uint16:
      return MPI_UINT16_T;
    case DataType::int32:
      return MPI_INT32_T;
    case DataType::uint32:
      return MPI_UINT32_T;
    case DataType::int64:
      return MPI_INT64_T;
    case DataType::uint64:
      return MPI_UINT64_T;
    case DataType::float16:
    case DataType::bfloat16:
      return reduces ? MPI_DATATYPE_NULL : MPI_UINT16_T;
    case DataType::float32:
      return MPI_FLOAT;
    case DataType::float64:
      return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return MPI_SUM;
    case ReduceOp::prod:
      return MPI_PROD;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      return MPI_MAX;
  }
  return MPI_OP_NULL;
}

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(call) +
                           " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

// The send and receive buffers MPI's call takes: an in-place call's input is already in its
// output, so MPI_IN_PLACE stands for it (MPI's reduce_scatter takes the whole input in recv
// and leaves the result in its first block).
struct MpiBuffers {
  const void* send;
  void* recv;
};

MpiBuffers mpi_buffers(MPI_Comm comm, const CallArgs& a) {
  if (!a.in_place) return {a.send, a.recv};
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const bool root = rank == a.root;
  switch (a.coll) {
    case Coll::allreduce:
    case Coll::allgather:
      return {MPI_IN_PLACE, a.recv};
    case Coll::broadcast:
      return {nullptr, a.recv};
    case Coll::reduce:
      return {root ? MPI_IN_PLACE : a.recv, a.recv};
    case Coll::reduce_scatter:
      return {MPI_IN_PLACE, a.send};
    case Coll::gather:
      return {root ? MPI_IN_PLACE : a.send, a.recv};
    case Coll::scatter:
      return {a.send, root ? MPI_IN_PLACE : a.recv};
    case Coll::alltoall:  // no in place (the options refuse it)
      break;
  }
  return {a.send, a.recv};
}

}  // namespace

const char* to_string(Coll c) noexcept {
  switch (c) {
    case Coll::allreduce:
      return "allreduce";
    case Coll::broadcast:
      return "broadcast";
    case Coll::reduce:
      return "reduce";
    case Coll::allgather:
      return "allgather";
    case Coll::reduce_scatter:
      return "reduce_scatter";
    case Coll::gather:
      return "gather";
    case Coll::scatter:
      return "scatter";
    case Coll::alltoall:
      return "alltoall";
  }
  return "?";
}

// Underscores are ignored, so nccl-tests' spellings (all_reduce, all_gather) and synk's API
// names work as well as the table's (allreduce, reduce_scatter).
std::optional<Coll> parse_coll(std::string_view name) {
  const auto bare = [](std::string_view s) {
    std::string out;
    for (char ch : s) {
      if (ch != '_') out += ch;
    }
    return out;
  };
  const std::string wanted = bare(name);
  for (Coll c : kAllColls) {
    if (wanted == bare(to_string(c))) return c;
  }
  return std::nullopt;
}

CallArgs placed(const CallArgs& a, int rank) {
  if (!a.in_place) return a;
  CallArgs p = a;
  const std::size_t block_bytes = a.layout.block * size_of(a.dtype);
  const auto at_block = [&](void* base, int r) {
    return static_cast<unsigned char*>(base) + static_cast<std::size_t>(r) * block_bytes;
  };
  switch (a.coll) {
    case Coll::allreduce:
    case Coll::reduce:
      p.send = a.recv;
      break;
    case Coll::allgather:
      p.send = at_block(a.recv, rank);
      break;
    case Coll::gather:
      if (rank == a.root) p.send = at_block(a.recv, rank);
      break;
    case Coll::reduce_scatter:
      p.recv = at_block(a.send, rank);
      break;
    case Coll::scatter:
      if (rank == a.root) p.recv = at_block(a.send, rank);
      break;
    case Coll::broadcast:
    case Coll::alltoall:
      break;
  }
  return p;
}

void refill_input(const CallArgs& base, int rank, unsigned char value) {
  const CallArgs a = placed(base, rank);
  if (a.coll == Coll::broadcast) {
    if (rank == a.root) std::memset(a.recv, value, a.layout.recv_bytes);
  } else if (a.coll != Coll::scatter || rank == a.root) {
    std::memset(a.send, value, a.layout.send_bytes);
  }
}

bool uses_op(Coll c) noexcept {
  return c == Coll::allreduce || c == Coll::reduce || c == Coll::reduce_scatter;
}

bool has_root(Coll c) noexcept {
  return c == Coll::broadcast || c == Coll::reduce || c == Coll::gather || c == Coll::scatter;
}

bool is_blocked(Coll c) noexcept {
  return c == Coll::allgather || c == Coll::reduce_scatter || c == Coll::gather ||
         c == Coll::scatter || c == Coll::alltoall;
}

double busbw_factor(Coll c, int nranks) noexcept {
  const double n = nranks;
  switch (c) {
    case Coll::allreduce:
      return 2.0 * (n - 1) / n;
    case Coll::allgather:
    case Coll::reduce_scatter:
    case Coll::gather:  // nccl-tests' gather_perf and scatter_perf too (it was 1 here)
    case Coll::scatter:
    case Coll::alltoall:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

Layout make_layout(Coll c, std::size_t bytes, DataType dtype, int nranks) {
  const std::size_t es = size_of(dtype);
  const std::size_t n = static_cast<std::size_t>(nranks);
  Layout l;
  if (is_blocked(c)) {
    l.block = bytes / es / n;
    l.count = l.block * n;
  } else {
    l.count = l.block = bytes / es;
  }
  l.bytes = l.count * es;
  const std::size_t block_bytes = l.block * es;
  switch (c) {
    case Coll::allgather:
    case Coll::gather:
      l.send_bytes = block_bytes;
      l.recv_bytes = l.bytes;
      break;
    case Coll::reduce_scatter:
    case Coll::scatter:
      l.send_bytes = l.bytes;
      l.recv_bytes = block_bytes;
      break;
    case Coll::broadcast:
      l.send_bytes = 0;
      l.recv_bytes = l.bytes;
      break;
    case Coll::allreduce:
    case Coll::reduce:
    case Coll::alltoall:
      l.send_bytes = l.recv_bytes = l.bytes;
      break;
  }
  return l;
}

// The non-blocking call, waited for at once: what issuing costs beside the blocking call (a's
// pointers as placed()).
void call_synk_nonblocking(Communicator& comm, const CallArgs& a) {
  const std::size_t b = a.layout.block;
  Request r;
  switch (a.coll) {
    case Coll::allreduce: r = comm.iall_reduce(a.send, a.recv, b, a.dtype, a.op); break;
    case Coll::broadcast: r = comm.ibroadcast(a.recv, b, a.dtype, a.root); break;
    case Coll::reduce: r = comm.ireduce(a.send, a.recv, b, a.dtype, a.op, a.root); break;
    case Coll::allgather: r = comm.iall_gather(a.send, a.recv, b, a.dtype); break;
    case Coll::reduce_scatter: r = comm.ireduce_scatter(a.send, a.recv, b, a.dtype, a.op); break;
    case Coll::gather: r = comm.igather(a.send, a.recv, b, a.dtype, a.root); break;
    case Coll::scatter: r = comm.iscatter(a.send, a.recv, b, a.dtype, a.root); break;
    case Coll::alltoall: r = comm.iall_to_all(a.send, a.recv, b, a.dtype); break;
  }
  r.wait();
}

void call_synk(Communicator& comm, const CallArgs& base) {
  const CallArgs a = placed(base, comm.rank());
  if (a.nonblocking) {
    call_synk_nonblocking(comm, a);
    return;
  }
  const std::size_t b = a.layout.block;
  switch (a.coll) {
    case Coll::allreduce:
      comm.all_reduce(a.send, a.recv, b, a.dtype, a.op);
      break;
    case Coll::broadcast:
      comm.broadcast(a.recv, b, a.dtype, a.root);
      break;
    case Coll::reduce:
      comm.reduce(a.send, a.recv, b, a.dtype, a.op, a.root);
      break;
    case Coll::allgather:
      comm.all_gather(a.send, a.recv, b, a.dtype);
      break;
    case Coll::reduce_scatter:
      comm.reduce_scatter(a.send, a.recv, b, a.dtype, a.op);
      break;
    case Coll::gather:
      comm.gather(a.send, a.recv, b, a.dtype, a.root);
      break;
    case Coll::scatter:
      comm.scatter(a.send, a.recv, b, a.dtype, a.root);
      break;
    case Coll::alltoall:
      comm.all_to_all(a.send, a.recv, b, a.dtype);
      break;
  }
}

bool mpi_has_baseline(const CallArgs& a) {
  return a.layout.block <= static_cast<std::size_t>(INT_MAX) &&
         mpi_type(a.dtype, uses_op(a.coll)) != MPI_DATATYPE_NULL;
}

void call_mpi(MPI_Comm comm, const CallArgs& a) {
  const auto [send, recv] = mpi_buffers(comm, a);
  const int b = static_cast<int>(a.layout.block);
  const MPI_Datatype t = mpi_type(a.dtype, uses_op(a.coll));
  switch (a.coll) {
    case Coll::allreduce:
      check_mpi(MPI_Allreduce(send, recv, b, t, mpi_op(a.op), comm), "MPI_Allreduce");
      break;
    case Coll::broadcast:
      check_mpi(MPI_Bcast(recv, b, t, a.root, comm), "MPI_Bcast");
      break;
    case Coll::reduce:
      check_mpi(MPI_Reduce(send, recv, b, t, mpi_op(a.op), a.root, comm), "MPI_Reduce");
      break;
    case Coll::allgather:
      check_mpi(MPI_Allgather(send, b, t, recv, b, t, comm), "MPI_Allgather");
      break;
    case Coll::reduce_scatter:
      check_mpi(MPI_Reduce_scatter_block(send, recv, b, t, mpi_op(a.op), comm),
                "MPI_Reduce_scatter_block");
      break;
    case Coll::gather:
      check_mpi(MPI_Gather(send, b, t, recv, b, t, a.root, comm), "MPI_Gather");
      break;
    case Coll::scatter:
      check_mpi(MPI_Scatter(send, b, t, recv, b, t, a.root, comm), "MPI_Scatter");
      break;
    case Coll::alltoall:
      check_mpi(MPI_Alltoall(send, b, t, recv, b, t, comm), "MPI_Alltoall");
      break;
  }
}

}  // namespace synk::bench
