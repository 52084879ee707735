// Which algorithm (algorithms/) each collective of shm::Group runs: eager through the entries
// up to a limit per collective, then through the slots or, where the measurement of
// algo_chooser.h finds it faster, by cross-memory attach (scatter's single copy starts at a
// fixed size instead; gatherv, scatterv, reduce_scatter and all_to_all(v) have none). Large
// all-reduces, and reduces of more than root_reduces_bytes on more than 2 ranks, reduce in
// slices.
#include <algorithm>

#include "backends/shm/shm_group.h"

namespace synk::shm {

namespace {

using detail::Collective;

// On 2 ranks, the largest calls of each collective that go through the entries (per rank for
// the gathers, in all for reduce_scatter): above these the slots were faster. On more ranks
// every collective keeps kEagerBytes: through the slots a rank runs only two steps ahead of the
// slowest one (docs/measurements.md#eager-limits).
constexpr std::size_t kRootedEagerBytes = 1024;  // broadcast and reduce
constexpr std::size_t kGatherEagerBytes = 1024;
constexpr std::size_t kAllGatherEagerBytes = 512;
constexpr std::size_t kReduceScatterEagerBytes = 512;
// scatter (in all, on any number of ranks): through the slots every call was a full sync of all
// ranks, where MPI's root sends and goes on.
constexpr std::size_t kScatterEagerBytes = kEagerBytes;

constexpr std::size_t eager_limit(std::size_t on_two_ranks, int ranks) {
  return ranks <= 2 ? on_two_ranks : kEagerBytes;
}

}  // namespace

std::size_t Group::chosen_bytes(const detail::CollArgs& a) const {
  const std::size_t bytes = a.count * size_of(a.dtype);
  std::size_t fixed_up_to = 0;  // calls up to this size take a way of their own
  switch (a.coll) {
    case Collective::all_reduce:
      fixed_up_to = std::max(kEagerBytes, std::min(cfg_.small_bytes, cfg_.slot_bytes));
      break;
    case Collective::reduce:
    case Collective::broadcast:
      fixed_up_to = eager_limit(kRootedEagerBytes, cfg_.size);
      break;
    case Collective::all_gather:
      fixed_up_to = eager_limit(kAllGatherEagerBytes, cfg_.size);
      break;
    case Collective::gather:
      fixed_up_to = eager_limit(kGatherEagerBytes, cfg_.size);
      break;
    default:
      return 0;  // not a chosen collective
  }
  return bytes > fixed_up_to ? bytes : 0;
}

void Group::all_reduce(const detail::CollArgs& a) {
  begin(a);
  const std::size_t bytes = a.count * size_of(a.dtype);
  if (bytes <= kEagerBytes) {
    algo::all_reduce_eager(parts_, a);
  } else if (chosen_bytes(a) == 0) {
    algo::all_reduce_one_step(parts_, a);
  } else if (cma_chosen(Collective::all_reduce, bytes)) {
    algo::all_reduce_cma(parts_, a);
  } else {
    algo::reduce_slices(parts_, a);
  }
  end();
}

void Group::reduce(const detail::CollArgs& a) {
  begin(a);
  const std::size_t bytes = a.count * size_of(a.dtype);
  if (chosen_bytes(a) == 0) {
    algo::reduce_eager(parts_, a);
  } else if (cma_chosen(Collective::reduce, bytes)) {
    algo::reduce_cma(parts_, a);
  } else if (cfg_.size <= 2 || bytes <= cfg_.root_reduces_bytes) {
    algo::reduce_at_root(parts_, a);
  } else {
    algo::reduce_slices(parts_, a);
  }
  end();
}

void Group::broadcast(const detail::CollArgs& a) {
  begin(a);
  const std::size_t bytes = a.count * size_of(a.dtype);
  if (chosen_bytes(a) == 0) {  // the root does not wait
    algo::broadcast_eager(parts_, a);
  } else if (cma_chosen(Collective::broadcast, bytes)) {
    algo::broadcast_cma(parts_, a);
  } else {
    algo::broadcast_slots(parts_, a);
  }
  end();
}

void Group::all_gather(const detail::CollArgs& a) {
  begin(a);
  const std::size_t bytes = a.count * size_of(a.dtype);
  if (chosen_bytes(a) == 0) {
    algo::gather_eager(parts_, a);
  } else if (cma_chosen(Collective::all_gather, bytes)) {
    algo::gather_cma(parts_, a);
  } else {
    algo::gather_slots(parts_, a);
  }
  end();
}

void Group::gather(const detail::CollArgs& a) {
  begin(a);
  const std::size_t bytes = a.count * size_of(a.dtype);
  if (chosen_bytes(a) == 0) {  // only the root waits
    algo::gather_eager(parts_, a);
  } else if (cma_chosen(Collective::gather, bytes)) {
    algo::gather_cma(parts_, a);
  } else {
    algo::gather_slots(parts_, a);
  }
  end();
}

void Group::gatherv(const detail::CollArgs& a) {
  begin(a);
  algo::gatherv_slots(parts_, a);
  end();
}

void Group::scatterv(const detail::CollArgs& a) {
  begin(a);
  algo::scatterv_slots(parts_, a);
  end();
}

void Group::scatter(const detail::CollArgs& a) {
  begin(a);
  const std::size_t block = a.count * size_of(a.dtype);
  if (block * static_cast<std::size_t>(cfg_.size) <= kScatterEagerBytes) {
    algo::scatter_eager(parts_, a);
  } else if (cma_.usable(block)) {
    algo::scatter_cma(parts_, a);
  } else {
    algo::scatter_slots(parts_, a);
  }
  end();
}

void Group::reduce_scatter(const detail::CollArgs& a) {
  begin(a);
  const std::size_t all = static_cast<std::size_t>(cfg_.size) * a.count * size_of(a.dtype);
  if (all <= eager_limit(kReduceScatterEagerBytes, cfg_.size)) {
    algo::reduce_scatter_eager(parts_, a);
  } else {
    algo::reduce_scatter_slots(parts_, a);
  }
  end();
}

void Group::all_to_all(const detail::CollArgs& a) {
  begin(a);
  algo::all_to_all_slots(parts_, a);
  end();
}

void Group::all_to_allv(const detail::CollArgs& a) {
  begin(a);
  algo::all_to_allv_slots(parts_, a);
  end();
}

void Group::barrier() {
  begin(detail::CollArgs{});  // Collective::barrier, count 0
  steps_.next_step();
  steps_.sync();
  end();
}

}  // namespace synk::shm
