// The seam between Communicator and the backends: one descriptor per call (CollArgs), already
// validated by the Communicator, and one virtual function per collective.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/call_label.h"
#include "synk/error.h"
#include "synk/node_buffer.h"
#include "synk/request.h"
#include "synk/types.h"

namespace synk::detail {

enum class Collective {
  all_reduce,
  reduce,
  broadcast,
  all_gather,
  gather,
  gatherv,
  scatter,
  scatterv,
  reduce_scatter,
  all_to_all,
  all_to_allv,
  barrier,
};
const char* to_string(Collective c) noexcept;
// Inline: every call asks (validation, the shm group's call descriptor).
inline bool uses_op(Collective c) noexcept {  // all_reduce, reduce, reduce_scatter
  return c == Collective::all_reduce || c == Collective::reduce || c == Collective::reduce_scatter;
}
// reduce, broadcast, gather, gatherv, scatter, scatterv
inline bool has_root(Collective c) noexcept {
  return c == Collective::reduce || c == Collective::broadcast || c == Collective::gather ||
         c == Collective::gatherv || c == Collective::scatter || c == Collective::scatterv;
}
// gatherv and scatterv: the count differs by rank, the root's counts say each one's.
inline bool has_counts(Collective c) noexcept {
  return c == Collective::gatherv || c == Collective::scatterv;
}
// Those and all_to_allv: the ranks' counts differ, so calls are not compared by count.
inline bool counts_differ(Collective c) noexcept {
  return has_counts(c) || c == Collective::all_to_allv;
}
// "all_reduce(count 100, float32, sum)": the fields the collective uses, for error messages.
std::string describe_call(Collective c, std::uint64_t count, DataType t, ReduceOp op, int root);
// "" where this process may still take `bytes` more memory, else why not ("cannot reserve N
// bytes of memory for a node buffer: more than ..."), whatever the kernel would grant: a larger
// mapping where it overcommits (vm.overcommit_memory=1) meets the OOM killer when touched.
std::string node_buffer_room_error(std::size_t bytes);

// Who the ranks are. Every communicator on the seam is synk's own duplicate.
struct CommContext {
  MPI_Comm comm = MPI_COMM_NULL;         // all ranks
  MPI_Comm local_comm = MPI_COMM_NULL;   // the ranks of this (possibly simulated) node
  MPI_Comm leader_comm = MPI_COMM_NULL;  // local rank 0 of every node; MPI_COMM_NULL elsewhere
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int node = 0;
  int num_nodes = 1;
  bool yields_core = false;  // CommOptions::yield_when_waiting
  // Where the ranks span several (possibly simulated) nodes: each rank's node, and each node's
  // host name (its first rank's); empty on one node.
  std::vector<int> node_of_rank;
  std::vector<std::string> node_hosts;
  // Each rank's rank in MPI_COMM_WORLD (the job's, as mpirun and synkrun name them) where some
  // rank's differs from its rank here (a split communicator); empty where none does.
  std::vector<int> job_ranks;

  // "node 1 on hostB" (or "node 1" where the hosts are not known), for messages.
  std::string node_text(int n) const;
  // "3", or "3 (job rank 5)" where rank 3 of this communicator is not the job's rank 3; with
  // a node, "3 (job rank 5, node 1 on hostB)". For messages.
  std::string rank_text(int r, std::optional<int> on_node = std::nullopt) const;
};

// One call, as the user made it. Meaning of count: per rank for all_gather, gather and scatter,
// the result size for reduce_scatter, the send count for gatherv (recv_counts at the root), per
// pair of ranks for all_to_all, every element sent for all_to_allv.
struct CollArgs {
  Collective coll = Collective::barrier;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  DataType dtype = DataType::uint8;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  // Per rank, read at the root: how many elements gatherv receives from, and scatterv sends
  // to, each rank. all_to_allv: how many this rank sends to each rank.
  std::span<const std::size_t> counts;
  // all_to_allv: how many this rank receives from each rank.
  std::span<const std::size_t> recv_counts;
  void* stream = nullptr;  // cudaStream_t for device backends; null means the backend's own
  // A typed helper's own argument check failed with this text: validate() throws it, so it
  // fails the call on every rank the way any rejected argument does.
  const std::string* typed_error = nullptr;
  // What errors call this call where it is a step of another (hier's node broadcast of an
  // all_reduce says "all_reduce"); null: its own collective's name.
  const char* name = nullptr;
  // A non-blocking call that runs at issue, on the caller's thread (MPI below
  // MPI_THREAD_MULTIPLE): a Timeout's message says how ranks meet in such a wait
  // (kAtIssueHint).
  bool at_issue = false;
  // What the call is part of when synk made it (call_label.h), taken when it is made: a call
  // queued before it and run on this thread later keeps its own.
  CallLabel label = CallLabel::user;
};

// What a Timeout in a call run at issue adds: the rank it waited for may have issued the call
// and be stuck in another.
inline constexpr char kAtIssueHint[] =
    ". MPI runs below MPI_THREAD_MULTIPLE, so synk's non-blocking calls run when issued: ranks "
    "that issue them in different orders (on two communicators), or that wait in an MPI call of "
    "their own between issue and wait, meet here; start MPI with MPI_THREAD_MULTIPLE";

// The backends. Code outside them asks a backend what it can do (the capability queries of
// Backend) or which kind it is, never compares names.
enum class BackendKind { mpi, shm, hier, nccl };
const char* to_string(BackendKind k);
// What SYNK_BACKEND and CommOptions::backend take: "auto" or a backend's name (hier is what
// auto makes across nodes, not asked for by name).
inline constexpr std::string_view kBackendChoices[] = {"auto", "mpi", "shm", "nccl"};
// "auto, mpi, shm or nccl", and how to get hier, for messages.
std::string backend_choices_text();

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  const char* name() const { return to_string(kind()); }
  virtual Request all_reduce(const CollArgs& a) = 0;
  virtual Request reduce(const CollArgs& a) = 0;
  virtual Request broadcast(const CollArgs& a) = 0;
  virtual Request all_gather(const CollArgs& a) = 0;
  virtual Request gather(const CollArgs& a) = 0;
  virtual Request gatherv(const CollArgs& a) = 0;
  virtual Request scatter(const CollArgs& a) = 0;
  virtual Request scatterv(const CollArgs& a) = 0;
  virtual Request reduce_scatter(const CollArgs& a) = 0;
  virtual Request all_to_all(const CollArgs& a) = 0;
  virtual Request all_to_allv(const CollArgs& a) = 0;
  virtual Request barrier() = 0;
  // The CUDA device the collectives run on (an index among this rank's visible devices), or -1
  // for a host backend.
  virtual int device() const { return -1; }
  // Whether calls wait inside MPI's own blocking calls, which have no deadline: the Communicator
  // then arms the watchdog (mpi_watchdog.h) around them.
  virtual bool waits_in_mpi() const { return false; }
  // Whether every call is compared across the ranks before it runs, whatever SYNK_CHECK_CALLS
  // says (hier: between nodes a rank that rejected its arguments cannot tell the others inside
  // the call, and the next calls would pair up wrongly).
  virtual bool checks_every_call() const { return false; }
  // This rank makes no more calls here (MPI_Finalize has finished synk's work): a backend whose
  // peers wait in shared memory lets them fail at once instead of after SYNK_TIMEOUT.
  virtual void leave() {}
  // Communicator::alloc, on arguments every rank agreed on. The default: private page-aligned
  // memory (no other rank can read it; nothing changes for the collectives).
  virtual NodeBuffer alloc(std::size_t bytes);
  // Why this rank's buffers for `a` are ones this backend cannot take (the nccl backend: host
  // memory), or empty. Asked before validation, so that under SYNK_CHECK_CALLS (and on hier)
  // the other ranks learn of it as of any rejected argument, instead of waiting in the call.
  // Only asked of a backend that says it has such rules (once, at start): the others' calls
  // (shm's small ones take about 0.1 us) pay nothing for it.
  virtual bool has_buffer_rules() const { return false; }
  virtual std::string buffer_error(const CollArgs& a) const {
    (void)a;
    return {};
  }
  // This rank's arguments for `a` failed validation with `e`. A backend that can tell the other
  // ranks inside the call itself (so they fail too instead of waiting) does so and throws;
  // the default does nothing, and the Communicator rethrows e on this rank alone.
  virtual void reject(const CollArgs& a, const Error& e) {
    (void)a;
    (void)e;
  }
};

// The backend named `requested` (one of kBackendChoices) for the ranks in ctx.
// Collective over ctx.comm. Throws NotSupported for a backend this build or machine lacks.
std::unique_ptr<Backend> make_backend(const std::string& requested, const CommContext& ctx);

}  // namespace synk::detail
