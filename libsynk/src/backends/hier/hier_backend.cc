// See hier_backend.h.
#include "backends/hier/hier_backend.h"

#include <algorithm>
#include <climits>

#include "backends/mpi/mpi_types.h"
#include "core/env.h"
#include "core/logging.h"
#include "core/mpi_check.h"

namespace synk::detail {

namespace {

std::size_t max_chunk() {
  const std::size_t c = settings().mpi_max_chunk;
  return c ? c : static_cast<std::size_t>(INT_MAX);
}

}  // namespace

HierBackend::HierBackend(const CommContext& ctx)
    : ctx_(ctx), node_(join_shm_node(ctx.local_comm)), mpi_(ctx) {
  node_of_rank_.resize(static_cast<std::size_t>(ctx.size));
  SYNK_CHECK_MPI(MPI_Allgather(&ctx.node, 1, MPI_INT, node_of_rank_.data(), 1, MPI_INT, ctx.comm));
  local_rank_of_rank_.resize(static_cast<std::size_t>(ctx.size));
  SYNK_CHECK_MPI(MPI_Allgather(&ctx.local_rank, 1, MPI_INT, local_rank_of_rank_.data(), 1, MPI_INT,
                               ctx.comm));
  leader_of_node_.assign(static_cast<std::size_t>(ctx.num_nodes), -1);
  for (int r = ctx.size - 1; r >= 0; --r) {
    leader_of_node_[static_cast<std::size_t>(node_of_rank_[static_cast<std::size_t>(r)])] = r;
  }
  SYNK_LOG_AT(info, "hier backend: " << ctx.num_nodes << " nodes, " << ctx.local_size
                                     << " local ranks here (node " << ctx.node << ")");
}

Request HierBackend::all_reduce(const CollArgs& a) {
  if (a.dtype == DataType::float16 || a.dtype == DataType::bfloat16) return mpi_.all_reduce(a);
  const bool leader = ctx_.local_rank == 0;
  const ReduceOp local_op = a.op == ReduceOp::avg ? ReduceOp::sum : a.op;
  const std::size_t es = size_of(a.dtype);
  // Non-leaders need no result buffer for the node-local reduce; the leader reduces into recv.
  node_.group->reduce(a.send, leader ? a.recv : nullptr, a.count, a.dtype, local_op, 0);
  if (leader) {
    for (std::size_t off = 0; off < a.count; off += max_chunk()) {
      const std::size_t n = std::min(max_chunk(), a.count - off);
      SYNK_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, static_cast<unsigned char*>(a.recv) + off * es,
                                   static_cast<int>(n), mpi_datatype(a.dtype), mpi_reduce_op(a.op),
                                   ctx_.leader_comm));
    }
    if (a.op == ReduceOp::avg) scale_avg(a.recv, a.count, a.dtype, ctx_.size);
  }
  node_.group->broadcast(a.recv, a.count, a.dtype, 0);
  return {};
}

Request HierBackend::broadcast(const CollArgs& a) {
  const int root_node = node_of_rank_[static_cast<std::size_t>(a.root)];
  const int root_leader = leader_of_node_[static_cast<std::size_t>(root_node)];
  const std::size_t es = size_of(a.dtype);
  const MPI_Datatype t = mpi_datatype(a.dtype);
  const std::size_t chunk = max_chunk();
  auto* buf = static_cast<unsigned char*>(a.recv);
  // 1. The root hands its data to its node's leader (within the node, through shm).
  if (a.root != root_leader && ctx_.node == root_node) {
    node_.group->broadcast(a.recv, a.count, a.dtype,
                           local_rank_of_rank_[static_cast<std::size_t>(a.root)]);
  }
  // 2. Across the leaders. 3. Inside every other node.
  if (ctx_.local_rank == 0) {
    for (std::size_t off = 0; off < a.count; off += chunk) {
      const std::size_t n = std::min(chunk, a.count - off);
      SYNK_CHECK_MPI(MPI_Bcast(buf + off * es, static_cast<int>(n), t, root_node, ctx_.leader_comm));
    }
  }
  if (ctx_.node != root_node || a.root == root_leader) {
    node_.group->broadcast(a.recv, a.count, a.dtype, 0);
  }
  return {};
}

Request HierBackend::barrier() {
  node_.group->barrier();
  if (ctx_.local_rank == 0) SYNK_CHECK_MPI(MPI_Barrier(ctx_.leader_comm));
  node_.group->barrier();
  return {};
}

}  // namespace synk::detail
