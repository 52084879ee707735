// The shm backend's settings, read when a backend is made.
#pragma once

#include <cstddef>
#include <string>

#include "backends/shm/algo_chooser.h"
#include "backends/shm/group_config.h"
#include "backends/shm/store_tuner.h"
#include "core/env.h"

namespace synk::detail {

struct ShmSettings {
  std::size_t slot_bytes = 0;  // SYNK_SHM_SLOT_BYTES: step size per rank (0: 1 MiB)
  // SYNK_SHM_CMA_BYTES: scatters of at least this many bytes per rank copy straight out of the
  // root's buffer (0: never; -1: the default, 1 MiB).
  long long cma_bytes = -1;
  // SYNK_SHM_ONE_STEP_BYTES: all_reduces of up to this many bytes (past the entries) run in one
  // step, every rank reducing the whole vector (-1: the default, 16 KiB on 2 ranks, 0 on more).
  long long one_step_bytes = -1;
  // SYNK_SHM_ROOT_REDUCES_BYTES: on more than 2 ranks, reduces of up to this many bytes (past
  // the entries) are reduced by the root alone, larger ones in slices (-1: the default,
  // 128 KiB on 3 or 4 ranks, 0 on more).
  long long root_reduces_bytes = -1;
  // SYNK_SHM_SPIN_US: where every rank has a CPU of its own, how long a waiting rank polls
  // before it starts yielding its core (-1: the default, 2000).
  long long spin_us = -1;
  // SYNK_SHM_STREAM=auto|never|always: how large calls write shared memory: each rank times
  // both ways and keeps the faster (store_tuner.h), ordinary stores, or non-temporal ones.
  shm::StoreMode store_mode = shm::StoreMode::tuned;
  // SYNK_SHM_SEGMENTS=auto|named: anonymous segments where the node's ranks can share one, else
  // named; or named (POSIX segments in /dev/shm) only (segment_share.h).
  bool named_segments_only = false;
  // SYNK_SHM_ALGO: "broadcast=cma,all_gather=slots" forces those collectives' way instead of
  // measuring.
  shm::ForcedAlgos forced_algos{};

  // The values in effect, defaults included (a default set explicitly is the same setting).
  std::size_t slot_bytes_in_effect() const {
    return slot_bytes ? slot_bytes : shm::GroupConfig{}.slot_bytes;
  }
  std::size_t cma_bytes_in_effect() const {
    return cma_bytes >= 0 ? static_cast<std::size_t>(cma_bytes) : shm::GroupConfig{}.cma_min_bytes;
  }

  static ShmSettings parse(const EnvGetter& get);
};

inline const ShmSettings& shm_settings() { return env::cached<ShmSettings>(); }

}  // namespace synk::detail
