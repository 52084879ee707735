// Backend choice: SYNK_BACKEND (or CommOptions::backend) names one; "auto" picks the best
// backend that exists for the communicator's layout.
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "backends/hier/hier_backend.h"
#include "backends/mpi/mpi_backend.h"
#if SYNK_HAVE_NCCL
#include "backends/nccl/nccl_backend.h"
#endif
#include "backends/shm/segment_share.h"
#include "backends/shm/shm_backend.h"
#include "core/backend.h"
#include "core/logging.h"
#include "synk/error.h"

namespace synk::detail {

std::string node_buffer_room_error(std::size_t bytes) {
  return shm::memory_room_error(bytes, "memory for a node buffer");  // the shm backend's check
}

NodeBuffer Backend::alloc(std::size_t bytes) {
  if (bytes == 0) return {};
  // Anonymous pages: zero-filled as a new shared segment is, and like it backed only where
  // written, so that a large buffer used in part (KeyValue's fusion buffer) costs its part.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    throw Error(ErrorCode::System, "alloc: could not allocate " + std::to_string(bytes) + " bytes");
  }
  return NodeBuffer(p, bytes, std::shared_ptr<void>(p, [bytes](void* q) { munmap(q, bytes); }));
}

const char* to_string(Collective c) noexcept {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::reduce: return "reduce";
    case Collective::broadcast: return "broadcast";
    case Collective::all_gather: return "all_gather";
    case Collective::gather: return "gather";
    case Collective::gatherv: return "gatherv";
    case Collective::scatter: return "scatter";
    case Collective::scatterv: return "scatterv";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_to_all: return "all_to_all";
    case Collective::all_to_allv: return "all_to_allv";
    case Collective::barrier: return "barrier";
  }
  return "?";
}

std::string describe_call(Collective c, std::uint64_t count, DataType t, ReduceOp op, int root) {
  if (c == Collective::barrier) return "barrier()";  // its count and dtype mean nothing
  std::string s = std::string(to_string(c)) + "(count " + std::to_string(count) + ", " + to_string(t);
  if (uses_op(c)) s += std::string(", ") + to_string(op);
  if (has_root(c)) s += ", root " + std::to_string(root);
  return s + ")";
}

const char* to_string(BackendKind k) {
  switch (k) {
    case BackendKind::mpi: return "mpi";
    case BackendKind::shm: return "shm";
    case BackendKind::hier: return "hier";
    case BackendKind::nccl: return "nccl";
  }
  return "?";
}

std::string backend_choices_text() {
  std::string text;
  const std::size_t n = std::size(kBackendChoices);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) text += i + 1 == n ? " or " : ", ";
    text += kBackendChoices[i];
  }
  return text + " (hier is not asked for by name: auto picks it when the ranks span nodes, and "
                "SYNK_SIMULATE_NODES=N tries it on one node)";
}

std::unique_ptr<Backend> make_backend(const std::string& requested, const CommContext& ctx) {
  if (requested == "mpi") {
    SYNK_LOG_AT(info, "backend mpi (requested) for " << ctx.size << " ranks on " << ctx.num_nodes
                                                    << " node(s)");
    return std::make_unique<MpiBackend>(ctx);
  }
  // auto and shm: shared memory inside a node, and MPI between node leaders when there are
  // several nodes.
  if (requested == "shm" || requested == "auto") {
    if (ctx.num_nodes == 1) {
      SYNK_LOG_AT(info, "backend shm (" << requested << ") for " << ctx.size << " ranks on one node");
      return std::make_unique<ShmBackend>(ctx);
    }
    SYNK_LOG_AT(info, "backend hier (" << requested << ") for " << ctx.size << " ranks on "
                                       << ctx.num_nodes << " nodes");
    return std::make_unique<HierBackend>(ctx);
  }
  if (requested == "nccl") {
#if SYNK_HAVE_NCCL
    SYNK_LOG_AT(info, "backend nccl (requested) for " << ctx.size << " ranks on " << ctx.num_nodes
                                                     << " node(s)");
    return std::make_unique<NcclBackend>(ctx);
#else
    throw Error(ErrorCode::NotSupported,
                "the nccl backend: this build has no NCCL backend (configured with "
                "SYNK_WITH_NCCL=OFF or without CUDA)");
#endif
  }
  throw Error(ErrorCode::InvalidArgument,
              "backend '" + requested + "' is not one of " + backend_choices_text());
}

}  // namespace synk::detail
