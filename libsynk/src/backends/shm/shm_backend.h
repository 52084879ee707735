// ShmBackend: the ranks of one node, through one POSIX shared-memory segment set up over MPI
// (local rank 0 creates it, the name travels by MPI_Bcast, it is unlinked once all have mapped).
#pragma once

#include <memory>

#include "backends/shm/segment.h"
#include "backends/shm/shm_group.h"
#include "core/backend.h"

namespace synk::detail {

class ShmBackend final : public Backend {
 public:
  // Throws NotSupported when the ranks of ctx span more than one node.
  explicit ShmBackend(const CommContext& ctx);
  const char* name() const override { return "shm"; }
  Request all_reduce(const CollArgs& a) override;
  Request reduce(const CollArgs& a) override;
  Request broadcast(const CollArgs& a) override;
  Request all_gather(const CollArgs& a) override;
  Request gather(const CollArgs& a) override;
  Request gatherv(const CollArgs& a) override;
  Request scatter(const CollArgs& a) override;
  Request reduce_scatter(const CollArgs& a) override;
  Request barrier() override;

 private:
  shm::Segment segment_;
  std::unique_ptr<shm::Group> group_;
};

}  // namespace synk::detail
