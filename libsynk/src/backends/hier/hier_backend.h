// HierBackend: ranks on several nodes. Inside a node the shared-memory group, between nodes
// MPI among the node leaders (local rank 0): all_reduce = shm reduce to the leader, MPI
// all-reduce across leaders, shm broadcast; broadcast = to the root's leader, across leaders,
// then inside each node. The other collectives (and 16-bit float reductions, which must round
// once) use the MPI backend on the whole communicator.
#pragma once

#include <vector>

#include "backends/mpi/mpi_backend.h"
#include "backends/shm/shm_backend.h"
#include "core/backend.h"

namespace synk::detail {

class HierBackend final : public Backend {
 public:
  explicit HierBackend(const CommContext& ctx);
  const char* name() const override { return "hier"; }
  Request all_reduce(const CollArgs& a) override;
  Request reduce(const CollArgs& a) override { return mpi_.reduce(a); }
  Request broadcast(const CollArgs& a) override;
  Request all_gather(const CollArgs& a) override { return mpi_.all_gather(a); }
  Request gather(const CollArgs& a) override { return mpi_.gather(a); }
  Request gatherv(const CollArgs& a) override { return mpi_.gatherv(a); }
  Request scatter(const CollArgs& a) override { return mpi_.scatter(a); }
  Request reduce_scatter(const CollArgs& a) override { return mpi_.reduce_scatter(a); }
  Request barrier() override;

 private:
  CommContext ctx_;
  ShmNode node_;
  MpiBackend mpi_;
  std::vector<int> node_of_rank_;    // node index of every rank
  std::vector<int> local_rank_of_rank_;
  std::vector<int> leader_of_node_;  // global rank of every node's leader
  std::vector<unsigned char> scratch_;
};

}  // namespace synk::detail
