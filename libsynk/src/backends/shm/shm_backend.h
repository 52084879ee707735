// ShmBackend: the ranks of one node, through one shared-memory segment set up over MPI (local
// rank 0 creates it and every rank maps it: segment_share.h).
#pragma once

#include <memory>
#include <string>

#include "backends/shm/segment.h"
#include "backends/shm/shm_group.h"
#include "core/backend.h"

namespace synk::detail {

// One node's shared-memory group: the segment (nameless already) and the Group on it.
struct ShmNode {
  shm::Segment segment;
  std::unique_ptr<shm::Group> group;
};
// Sets up the group of the ranks of `comm` (all on one node): rank 0 creates the segment and
// every rank maps it (share_segment). Collective over comm and over `job`, every rank of the
// job (comm's ranks, or more when SYNK_SIMULATE_NODES splits a machine into several groups):
// the job's ranks on this machine all compete for its CPUs, which decides how a waiting rank
// waits (GroupConfig::machine_ranks). A failure on any rank is an error on every rank.
ShmNode join_shm_node(MPI_Comm comm, MPI_Comm job, bool yield_at_once = false);
// A new segment of `bytes` that every rank of `comm` (one node) has mapped, with no name left
// (try_share_segment). Collective; a failure on any rank is an error on every rank. `what`
// names it in errors, and creator_rank the rank that makes it (comm's rank 0) as the
// communicator numbers it (a hier node's first rank is not rank 0), GroupConfig::rank_text.
shm::Segment share_segment(MPI_Comm comm, std::size_t bytes, const char* what,
                           const std::string& creator_rank);

class ShmBackend final : public Backend {
 public:
  // Throws NotSupported when the ranks of ctx span more than one node.
  explicit ShmBackend(const CommContext& ctx);
  BackendKind kind() const override { return BackendKind::shm; }
  Request all_reduce(const CollArgs& a) override;
  Request reduce(const CollArgs& a) override;
  Request broadcast(const CollArgs& a) override;
  Request all_gather(const CollArgs& a) override;
  Request gather(const CollArgs& a) override;
  Request gatherv(const CollArgs& a) override;
  Request scatterv(const CollArgs& a) override;
  Request scatter(const CollArgs& a) override;
  Request reduce_scatter(const CollArgs& a) override;
  Request all_to_all(const CollArgs& a) override;
  Request all_to_allv(const CollArgs& a) override;
  Request barrier() override;
  void reject(const CollArgs& a, const Error& e) override;
  void leave() override { group_->close(); }
  // This rank's part of a new segment of size() parts, registered with the group.
  NodeBuffer alloc(std::size_t bytes) override;

 private:
  // Collective, in alloc: unmaps the node buffers every rank has dropped.
  void release_dropped_buffers();
  MPI_Comm comm_;
  ShmNode node_;
  shm::Group* group_;
};

}  // namespace synk::detail
