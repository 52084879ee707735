// What a shm::Group is made with: its rank and size, the slot size, the thresholds between its
// algorithms, and how its ranks wait. shm_backend.cc fills it from the settings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/shm/algo_chooser.h"
#include "backends/shm/store_tuner.h"
#include "core/job_rank_text.h"

namespace synk::shm {

// The one step reads the whole vector out of every rank's slot, the ranks' count times what the
// slices read: on 4, 8 and 16 ranks the slices were faster at every size from 4 KiB, and on 2 at
// 32 KiB in every host state measured
// (docs/measurements.md#one-step-or-slices-by-ranks-2026-11-28).
constexpr std::size_t default_one_step_bytes(int ranks) {
  return ranks <= 2 ? std::size_t{16} * 1024 : 0;
}

// On 3 or more ranks, a reduce reduced by the root alone reads every rank's slot on one core,
// where the slices spread that over all: on the 16-core GPU machine the root alone was faster
// up to 64 KiB on 4 ranks, and slower at every size on 8 and 16 (0.60-1.08x Open MPI on 16,
// against 1.33-4.11x in slices; docs/measurements.md#one-step-or-slices-by-ranks-2026-11-28).
constexpr std::size_t default_root_reduces_bytes(int ranks) {
  return ranks <= 4 ? std::size_t{128} * 1024 : 0;
}

struct GroupConfig {
  int rank = 0;
  int size = 1;
  std::size_t slot_bytes = std::size_t{1} << 20;  // per rank per set; a multiple of 4096
  // all_reduce up to this many bytes: the one-step algorithm. shm_backend.cc sets
  // default_one_step_bytes(size) unless SYNK_SHM_ONE_STEP_BYTES is set; here, 2 ranks' value.
  std::size_t small_bytes = default_one_step_bytes(2);
  // reduce up to this many bytes, or of any size on 2 ranks: the root reduces everything
  // (more: every rank a slice, as in all_reduce). shm_backend.cc sets
  // default_root_reduces_bytes(size) unless SYNK_SHM_ROOT_REDUCES_BYTES is set.
  std::size_t root_reduces_bytes = default_root_reduces_bytes(2);
  // scatters of at least this many bytes per rank: each rank pulls its block straight out of
  // the root's buffer (cross-memory attach, cma_pull.h); 0: never, for any collective.
  std::size_t cma_min_bytes = std::size_t{1} << 20;
  // SYNK_SHM_ALGO: the ways forced for the chosen collectives (algo_chooser.h); the others are
  // measured.
  ForcedAlgos forced_algos{};
  double timeout_s = 300.0;
  double stall_warn_s = 60.0;  // a wait this long is one warning line (SYNK_STALL_WARN)
  StoreMode store_mode = StoreMode::tuned;  // how large calls write the slots (store_tuner.h)
  // Where every rank has a CPU of its own (cpu_share.h), a waiting rank polls this long before
  // it starts yielding its core; where ranks share CPUs it yields after a few polls.
  std::uint32_t spin_us = 2000;
  // A waiting rank that has yielded for a while sleeps between polls instead: for calls made on
  // a thread beside the caller's computation (KeyValue's engine), whose waits for a rank that
  // has not pushed yet may last as long as that rank's computation.
  bool sleep_when_waiting = false;
  // Ranks of the job on this machine, this group's and others' (more than `size` where
  // SYNK_SIMULATE_NODES splits a machine into groups): with fewer CPUs than these, the ranks
  // share CPUs whatever this group's affinity masks say. 0: `size`.
  int machine_ranks = 0;
  // Each group rank's rank in the communicator, for messages: under the hier backend a group is
  // one node's ranks, and "rank 0 died" would name another rank of the communicator. Empty: the
  // same.
  std::vector<int> comm_ranks;
  // Each group rank's rank in MPI_COMM_WORLD (the job's, as mpirun names it) where some differ
  // from comm_ranks (a split communicator); empty where none does.
  std::vector<int> job_ranks;
  int comm_rank(int group_rank) const {
    const auto r = static_cast<std::size_t>(group_rank);
    return r < comm_ranks.size() ? comm_ranks[r] : group_rank;
  }
  // "3", or "3 (job rank 5)" where the communicator's rank 3 is not the job's.
  std::string rank_text(int group_rank) const {
    const int mine = comm_rank(group_rank);
    const auto r = static_cast<std::size_t>(group_rank);
    return detail::rank_with_job_rank(mine, r < job_ranks.size() ? job_ranks[r] : mine);
  }
};

}  // namespace synk::shm
