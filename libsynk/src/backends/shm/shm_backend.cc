// See shm_backend.h.
#include "backends/shm/shm_backend.h"

#include <string>
#include <utility>
#include <vector>

#include "backends/shm/segment_share.h"
#include "backends/shm/shm_settings.h"
#include "core/env.h"
#include "core/logging.h"
#include "core/mpi_check.h"
#include "core/mpi_runtime.h"
#include "synk/error.h"

namespace synk::detail {

shm::Segment share_segment(MPI_Comm comm, std::size_t bytes, const char* what,
                           const std::string& creator_rank) {
  shm::SharedSegment s = shm::try_share_segment(comm, bytes);
  if (!s.created) {
    throw Error(ErrorCode::System, "shm backend: rank " + creator_rank +
                                       " could not create the " + what + ": " + s.error);
  }
  if (!s.ok) {
    throw Error(ErrorCode::System, std::string("shm backend: a rank could not map the ") + what +
                                       (s.error.empty() ? std::string() : ": " + s.error));
  }
  return std::move(s.segment);
}

ShmNode join_shm_node(MPI_Comm comm, MPI_Comm job, bool yield_at_once) {
  int rank = 0, size = 1;
  SYNK_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  SYNK_CHECK_MPI(MPI_Comm_size(comm, &size));
  MPI_Comm machine = MPI_COMM_NULL;
  SYNK_CHECK_MPI(MPI_Comm_split_type(job, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &machine));
  int machine_ranks = size;
  SYNK_CHECK_MPI(MPI_Comm_size(machine, &machine_ranks));
  SYNK_CHECK_MPI(MPI_Comm_free(&machine));
  const Settings& core = settings();
  const ShmSettings& s = shm_settings();
  shm::GroupConfig cfg;
  cfg.rank = rank;
  cfg.size = size;
  cfg.slot_bytes = s.slot_bytes_in_effect();
  cfg.timeout_s = core.timeout_s;
  cfg.stall_warn_s = core.stall_warn_s;
  cfg.cma_min_bytes = s.cma_bytes_in_effect();
  cfg.forced_algos = s.forced_algos;
  cfg.small_bytes = s.one_step_bytes >= 0 ? static_cast<std::size_t>(s.one_step_bytes)
                                           : shm::default_one_step_bytes(size);
  cfg.root_reduces_bytes = s.root_reduces_bytes >= 0
                               ? static_cast<std::size_t>(s.root_reduces_bytes)
                               : shm::default_root_reduces_bytes(size);
  if (s.spin_us >= 0) cfg.spin_us = static_cast<std::uint32_t>(s.spin_us);
  if (yield_at_once) {
    cfg.spin_us = 0;
    cfg.sleep_when_waiting = true;
  }
  cfg.machine_ranks = machine_ranks;
  cfg.store_mode = s.store_mode;
  cfg.comm_ranks = ranks_in(comm, job);
  cfg.job_ranks = ranks_in(comm, MPI_COMM_WORLD);
  if (cfg.job_ranks == cfg.comm_ranks) cfg.job_ranks.clear();
  const std::size_t bytes = shm::Group::segment_bytes(size, cfg.slot_bytes);
  ShmNode node;
  node.segment = share_segment(comm, bytes, "shared segment", cfg.rank_text(0));
  node.group = std::make_unique<shm::Group>(node.segment.data(), cfg);
  SYNK_LOG_AT(info, "shm group: segment " << node.segment.name() << ", " << bytes << " bytes, slot "
                                           << cfg.slot_bytes << " bytes, " << size << " ranks");
  return node;
}

ShmBackend::ShmBackend(const CommContext& ctx) {
  if (ctx.num_nodes != 1 || ctx.local_size != ctx.size) {
    throw Error(ErrorCode::NotSupported,
                "the shm backend needs all ranks on one node; these " + std::to_string(ctx.size) +
                    " ranks span " + std::to_string(ctx.num_nodes) + " nodes (use auto: it "
                    "picks the hierarchical backend)");
  }
  comm_ = ctx.comm;
  node_ = join_shm_node(ctx.comm, ctx.comm, ctx.yields_core);
  group_ = node_.group.get();
}

// The node buffers that every rank has dropped are unmapped here, at the next allocation (a
// collective point, on the queue after every earlier call): a rank alone may not unmap one, as
// a peer that still holds its part may offer it, read through this rank's mapping.
void ShmBackend::release_dropped_buffers() {
  std::vector<std::uint8_t> dropped = group_->dropped_regions();
  if (dropped.empty()) return;
  SYNK_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, dropped.data(), static_cast<int>(dropped.size()),
                               MPI_UINT8_T, MPI_MIN, comm_));
  group_->release_regions(dropped);
}

NodeBuffer ShmBackend::alloc(std::size_t bytes) {
  if (bytes == 0) return {};
  release_dropped_buffers();
  const std::size_t stride = (bytes + 4095) / 4096 * 4096;  // every part starts a page
  auto segment = std::make_shared<shm::Segment>(
      share_segment(comm_, stride * static_cast<std::size_t>(group_->size()), "node buffer",
                    group_->rank_text(0)));
  auto* base = static_cast<unsigned char*>(segment->data());
  const int index = group_->add_region(base, stride, bytes, segment);
  SYNK_LOG_AT(info, "shm node buffer " << index << ": " << bytes << " bytes a rank, segment "
                                       << segment->name());
  return NodeBuffer(base + static_cast<std::size_t>(group_->rank()) * stride, bytes,
                    std::move(segment));
}

Request ShmBackend::all_reduce(const CollArgs& a) {
  group_->all_reduce(a);
  return {};
}
Request ShmBackend::reduce(const CollArgs& a) {
  group_->reduce(a);
  return {};
}
Request ShmBackend::broadcast(const CollArgs& a) {
  group_->broadcast(a);
  return {};
}
Request ShmBackend::all_gather(const CollArgs& a) {
  group_->all_gather(a);
  return {};
}
Request ShmBackend::gather(const CollArgs& a) {
  group_->gather(a);
  return {};
}
Request ShmBackend::gatherv(const CollArgs& a) {
  group_->gatherv(a);
  return {};
}
Request ShmBackend::scatterv(const CollArgs& a) {
  group_->scatterv(a);
  return {};
}
Request ShmBackend::all_to_all(const CollArgs& a) {
  group_->all_to_all(a);
  return {};
}
Request ShmBackend::all_to_allv(const CollArgs& a) {
  group_->all_to_allv(a);
  return {};
}
Request ShmBackend::scatter(const CollArgs& a) {
  group_->scatter(a);
  return {};
}
Request ShmBackend::reduce_scatter(const CollArgs& a) {
  group_->reduce_scatter(a);
  return {};
}
void ShmBackend::reject(const CollArgs& a, const Error& e) {
  group_->reject(a, e.code(), e.message());  // the group rebuilds the prefix
}

Request ShmBackend::barrier() {
  group_->barrier();
  return {};
}

}  // namespace synk::detail
