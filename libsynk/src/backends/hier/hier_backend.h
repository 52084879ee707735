// HierBackend: ranks on several nodes. Inside a node the shared-memory group, between nodes MPI.
// all_reduce of at least kSlicedBytes, when every node has the same number of ranks: a shm
// reduce-scatter inside the node, then local rank i of every node all-reduces block i over MPI
// (all ranks use the network at once, each for 1/L of the data), then a shm all-gather; smaller
// ones (or uneven nodes): shm reduce to the leader (local rank 0), MPI all-reduce across the
// leaders, shm broadcast. broadcast = to the root's leader, across leaders, then inside each
// node. The other collectives (and 16-bit float reductions, which must round once) use the MPI
// backend on the whole communicator.
#pragma once

#include <vector>

#include "backends/mpi/mpi_backend.h"
#include "backends/shm/shm_backend.h"
#include "core/backend.h"

namespace synk::detail {

class HierBackend final : public Backend {
 public:
  explicit HierBackend(const CommContext& ctx);
  ~HierBackend() override;
  HierBackend(const HierBackend&) = delete;
  HierBackend& operator=(const HierBackend&) = delete;
  static constexpr std::size_t kSlicedBytes = 64 * 1024;
  BackendKind kind() const override { return BackendKind::hier; }
  bool checks_every_call() const override { return true; }
  bool waits_in_mpi() const override { return true; }  // between the nodes
  void leave() override;
  Request all_reduce(const CollArgs& a) override;
  Request reduce(const CollArgs& a) override { return mpi_.reduce(a); }
  Request broadcast(const CollArgs& a) override;
  Request all_gather(const CollArgs& a) override { return mpi_.all_gather(a); }
  Request gather(const CollArgs& a) override { return mpi_.gather(a); }
  Request gatherv(const CollArgs& a) override { return mpi_.gatherv(a); }
  Request scatter(const CollArgs& a) override { return mpi_.scatter(a); }
  Request scatterv(const CollArgs& a) override { return mpi_.scatterv(a); }
  Request reduce_scatter(const CollArgs& a) override { return mpi_.reduce_scatter(a); }
  Request all_to_all(const CollArgs& a) override { return mpi_.all_to_all(a); }
  Request all_to_allv(const CollArgs& a) override { return mpi_.all_to_allv(a); }
  Request barrier() override;

 private:
  CommContext ctx_;
  ShmNode node_;
  MpiBackend mpi_;
  std::vector<int> local_rank_of_rank_;
  std::vector<int> leader_of_node_;  // global rank of every node's leader
  // Local rank i of every node (ordered by node); MPI_COMM_NULL when nodes differ in size.
  MPI_Comm slice_comm_ = MPI_COMM_NULL;

  void all_reduce_sliced(const CollArgs& a);
  void all_reduce_across(unsigned char* p, std::size_t count, const CollArgs& a,
                         MPI_Comm comm) const;
  void chunk_done() const;  // a chunk between the nodes is through
};

}  // namespace synk::detail
