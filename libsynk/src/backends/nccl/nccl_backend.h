// NcclBackend: every collective on device buffers through NCCL, one NCCL communicator per synk
// Communicator. Work is queued on the caller's stream (CollArgs::stream) or the backend's own;
// the Request completes when an event recorded after it has passed. No CUDA header here: the
// NCCL state lives in NcclComm (nccl_comm.h), which only this backend's sources include.
#pragma once

#include <functional>
#include <memory>

#include "core/backend.h"

namespace synk::detail {

class NcclComm;

class NcclBackend final : public Backend {
 public:
  // Collective over ctx.comm: selects this rank's device, checks that no two ranks share one,
  // and creates the NCCL communicator (non-blocking init with the SYNK_TIMEOUT deadline).
  explicit NcclBackend(const CommContext& ctx);
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  BackendKind kind() const override { return BackendKind::nccl; }
  Request all_reduce(const CollArgs& a) override;
  Request reduce(const CollArgs& a) override;
  Request broadcast(const CollArgs& a) override;
  Request all_gather(const CollArgs& a) override;
  Request gather(const CollArgs& a) override;
  Request gatherv(const CollArgs& a) override;
  Request scatter(const CollArgs& a) override;
  Request scatterv(const CollArgs& a) override;
  Request reduce_scatter(const CollArgs& a) override;
  Request all_to_all(const CollArgs& a) override;
  Request all_to_allv(const CollArgs& a) override;
  Request barrier() override;
  int device() const override;
  bool has_buffer_rules() const override { return true; }
  std::string buffer_error(const CollArgs& a) const override;

 private:
  // scatterv, named `op` in its errors (scatter is scatterv with equal counts).
  Request scatterv(const CollArgs& a, const char* op);
  // all_to_allv, named `op` in its errors (all_to_all is all_to_allv with equal counts).
  Request all_to_allv(const CollArgs& a, const char* op);
  std::size_t grouped_blocks(const CollArgs& a, const char* op, const char* call,
                             const std::function<int(int, std::size_t, std::size_t)>& post);
  CommContext ctx_;
  std::shared_ptr<NcclComm> comm_;  // shared with the Requests still in flight
};

}  // namespace synk::detail
