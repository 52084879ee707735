// See hier_backend.h.
#include "backends/hier/hier_backend.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <optional>
#include <string>

#include "backends/mpi/mpi_settings.h"
#include "backends/mpi/mpi_types.h"
#include "core/env.h"
#include "core/logging.h"
#include "core/mpi_check.h"
#include "core/mpi_runtime.h"
#include "core/mpi_watchdog.h"
#include "core/spread.h"
#include "synk/agreement.h"

namespace synk::detail {

namespace {

std::size_t max_chunk() { return mpi_settings().max_chunk_in_effect(); }

// Every rank of the job learns whether every node set up its shared memory. join_shm_node
// agrees within a node only: a node that could not threw on its own ranks, while the others
// went on into the MPI_Allgather of the constructor, where SYNK_TIMEOUT does not reach, and
// waited there for ever. A rank whose node failed throws its own error; the others name the
// node and its reason.
ShmNode join_every_node(const CommContext& ctx) {
  ShmNode node;
  std::exception_ptr failure;
  std::string reason;
  try {
    node = join_shm_node(ctx.local_comm, ctx.comm, ctx.yields_core);
  } catch (const Error& e) {
    failure = std::current_exception();
    reason = e.message();  // the message that carries it says its own code
  } catch (const std::exception& e) {
    failure = std::current_exception();
    reason = e.what();
  } catch (...) {
    failure = std::current_exception();
    reason = "an exception that is not a std::exception";
  }
  const std::optional<RankFailure> first =
      first_failure(ctx.comm, failure != nullptr, reason, ctx.node);
  if (!first) return node;
  if (failure) std::rethrow_exception(failure);
  throw Error(ErrorCode::Remote, "hier backend: node " + std::to_string(first->node) + " (rank " +
                                     std::to_string(first->rank) +
                                     ") could not set up its shared memory: " + first->text);
}

// `a` rooted at rank `root` of the node's group (a's own root is a rank of the whole job).
CollArgs with_root(const CollArgs& a, int root) {
  CollArgs local = a;
  local.root = root;
  return local;
}

// A step of the all-reduce `a` that the node's group runs: collective c on the count elements at
// send and recv, rooted at the leader (local rank 0). avg sums there: all_reduce_across scales
// once, after the step between the nodes.
CollArgs node_step(const CollArgs& a, Collective c, const void* send, void* recv,
                   std::size_t count) {
  CollArgs step = with_root(a, 0);
  if (step.name == nullptr) step.name = to_string(a.coll);  // errors name the caller's call
  step.coll = c;
  step.send = send;
  step.recv = recv;
  step.count = count;
  if (step.op == ReduceOp::avg) step.op = ReduceOp::sum;
  return step;
}

// While this rank works between the nodes within a call, a rank of its node that times out
// waiting for it says so, instead of that it has not reached the call.
class BetweenNodes {
 public:
  explicit BetweenNodes(shm::Group& g) : g_(g), was_(g.set_outside(true)) {}
  ~BetweenNodes() { g_.set_outside(was_); }
  BetweenNodes(const BetweenNodes&) = delete;
  BetweenNodes& operator=(const BetweenNodes&) = delete;

 private:
  shm::Group& g_;
  bool was_;
};

// The leader's part of a call between the nodes, which its node's other ranks await in the
// node's next step (`next`): an error there fails that step on every rank of the node (the
// leader takes part in it only to reject it), so that they learn of it at once and the node's
// steps stay in step. Before, they waited out SYNK_TIMEOUT for a leader that had left the call,
// and its next call met theirs as a mismatch.
void leader_part(shm::Group& g, const CollArgs& next, const std::function<void()>& part) {
  try {
    const BetweenNodes between(g);
    part();
  } catch (const Error& e) {
    g.reject(next, e.code(), e.message());
  }
}

}  // namespace

HierBackend::HierBackend(const CommContext& ctx)
    : ctx_(ctx), node_(join_every_node(ctx)), mpi_(ctx) {
  local_rank_of_rank_.resize(static_cast<std::size_t>(ctx.size));
  SYNK_CHECK_MPI(MPI_Allgather(&ctx.local_rank, 1, MPI_INT, local_rank_of_rank_.data(), 1, MPI_INT,
                               ctx.comm));
  leader_of_node_.assign(static_cast<std::size_t>(ctx.num_nodes), -1);
  for (int r = ctx.size - 1; r >= 0; --r) {
    leader_of_node_[static_cast<std::size_t>(ctx.node_of_rank[static_cast<std::size_t>(r)])] = r;
  }
  // The sliced all-reduce needs the same number of ranks on every node.
  Spread sizes({static_cast<std::uint64_t>(ctx.local_size)});
  SYNK_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, sizes.data(), sizes.size(), MPI_UINT64_T, MPI_MAX,
                               ctx.comm));
  const bool same_sizes = sizes.same(0);
  if (same_sizes && ctx.local_size > 1) {
    SYNK_CHECK_MPI(MPI_Comm_split(ctx.comm, ctx.local_rank, ctx.node, &slice_comm_));
    SYNK_CHECK_MPI(MPI_Comm_set_errhandler(slice_comm_, MPI_ERRORS_RETURN));
  }
  const char* sliced = slice_comm_ != MPI_COMM_NULL ? "on"
                       : same_sizes                  ? "off (one rank a node)"
                                                     : "off (nodes differ in size)";
  SYNK_LOG_AT(info, "hier backend: " << ctx.num_nodes << " nodes, " << ctx.local_size
                                     << " local ranks here (node " << ctx.node
                                     << "); sliced all-reduce " << sliced);
}

HierBackend::~HierBackend() {
  if (slice_comm_ != MPI_COMM_NULL && !mpi_is_finalized()) MPI_Comm_free(&slice_comm_);
}

void HierBackend::leave() { node_.group->close(); }

Request HierBackend::all_reduce(const CollArgs& a) {
  if (a.dtype == DataType::float16 || a.dtype == DataType::bfloat16) return mpi_.all_reduce(a);
  if (slice_comm_ != MPI_COMM_NULL && a.count * size_of(a.dtype) >= kSlicedBytes) {
    all_reduce_sliced(a);
    return {};
  }
  shm::Group& g = *node_.group;
  const bool leader = ctx_.local_rank == 0;
  // Non-leaders need no result buffer for the node-local reduce; the leader reduces into recv.
  g.reduce(node_step(a, Collective::reduce, a.send, leader ? a.recv : nullptr, a.count));
  const CollArgs back = node_step(a, Collective::broadcast, a.recv, a.recv, a.count);
  if (leader) {
    leader_part(g, back, [&] {
      all_reduce_across(static_cast<unsigned char*>(a.recv), a.count, a, ctx_.leader_comm);
    });
  }
  g.broadcast(back);
  return {};
}

// SYNK_TIMEOUT bounds a chunk between the nodes, not the call: the watchdog of this rank's MPI
// calls hears of each, and so do the node's ranks waiting for this one in the node's next step.
void HierBackend::chunk_done() const {
  mpi_watch_progress();
  node_.group->note_progress();
}

// The cross-node step of both all-reduces: p[0, count) in place over comm, in chunks of at most
// SYNK_MPI_MAX_CHUNK elements, then avg's scaling by the whole communicator's size.
void HierBackend::all_reduce_across(unsigned char* p, std::size_t count, const CollArgs& a,
                                    MPI_Comm comm) const {
  const std::size_t es = size_of(a.dtype);
  const BetweenNodes between(*node_.group);
  for (std::size_t off = 0; off < count; off += max_chunk()) {
    const std::size_t n = std::min(max_chunk(), count - off);
    SYNK_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, p + off * es, static_cast<int>(n),
                                 mpi_datatype(a.dtype), mpi_reduce_op(a.op), comm));
    chunk_done();
  }
  if (a.op == ReduceOp::avg) scale_avg(p, count, a.dtype, ctx_.size);
}

// The count splits into L blocks of b elements and a tail of count % L, which goes the leader's
// way (reduce, leaders' all-reduce, broadcast).
void HierBackend::all_reduce_sliced(const CollArgs& a) {
  shm::Group& g = *node_.group;
  const bool leader = ctx_.local_rank == 0;
  const std::size_t es = size_of(a.dtype);
  const std::size_t n_local = static_cast<std::size_t>(ctx_.local_size);
  const std::size_t b = a.count / n_local, body = b * n_local, tail = a.count - body;
  const auto* send = static_cast<const unsigned char*>(a.send);
  auto* recv = static_cast<unsigned char*>(a.recv);
  unsigned char* mine = recv + static_cast<std::size_t>(ctx_.local_rank) * b * es;
  unsigned char* rest = recv + body * es;  // the tail's result
  // In place (send == recv) this reduce-scatter is in place too: mine == send + rank * b.
  g.reduce_scatter(node_step(a, Collective::reduce_scatter, send, mine, b));
  if (tail) {
    g.reduce(node_step(a, Collective::reduce, send + body * es, leader ? rest : nullptr, tail));
  }
  all_reduce_across(mine, b, a, slice_comm_);
  if (tail && leader) all_reduce_across(rest, tail, a, ctx_.leader_comm);
  g.all_gather(node_step(a, Collective::all_gather, mine, recv, b));
  if (tail) g.broadcast(node_step(a, Collective::broadcast, rest, rest, tail));
}

Request HierBackend::broadcast(const CollArgs& a) {
  const int root_node = ctx_.node_of_rank[static_cast<std::size_t>(a.root)];
  const int root_leader = leader_of_node_[static_cast<std::size_t>(root_node)];
  const std::size_t es = size_of(a.dtype);
  const MPI_Datatype t = mpi_datatype(a.dtype);
  const std::size_t chunk = max_chunk();
  auto* buf = static_cast<unsigned char*>(a.recv);
  // 1. The root hands its data to its node's leader (within the node, through shm).
  if (a.root != root_leader && ctx_.node == root_node) {
    node_.group->broadcast(with_root(a, local_rank_of_rank_[static_cast<std::size_t>(a.root)]));
  }
  // 2. Across the leaders. 3. Inside every other node.
  const bool node_step_follows = ctx_.node != root_node || a.root == root_leader;
  const auto across = [&] {
    for (std::size_t off = 0; off < a.count; off += chunk) {
      const std::size_t n = std::min(chunk, a.count - off);
      SYNK_CHECK_MPI(
          MPI_Bcast(buf + off * es, static_cast<int>(n), t, root_node, ctx_.leader_comm));
      chunk_done();
    }
  };
  if (ctx_.local_rank == 0) {
    if (node_step_follows) {
      leader_part(*node_.group, with_root(a, 0), across);
    } else {
      across();
    }
  }
  if (node_step_follows) node_.group->broadcast(with_root(a, 0));
  return {};
}

Request HierBackend::barrier() {
  node_.group->barrier();
  if (ctx_.local_rank == 0) {
    CollArgs step;
    step.coll = Collective::barrier;
    leader_part(*node_.group, step, [&] { SYNK_CHECK_MPI(MPI_Barrier(ctx_.leader_comm)); });
  }
  node_.group->barrier();
  return {};
}

}  // namespace synk::detail
