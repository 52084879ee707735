// KeyValue's settings, and the fusion size the list collectives share with it.
#pragma once

#include <cstddef>

#include "core/env.h"

namespace synk::detail {

struct KvSettings {
  // SYNK_FUSION_BYTES: the largest fused collective of KeyValue and the list collectives (0:
  // every key or array on its own).
  std::size_t fusion_bytes = std::size_t{64} << 20;
  // SYNK_CYCLE_MS: how long KeyValue gathers pushes before it agrees with the other ranks on
  // which keys are ready (0: at once).
  int cycle_ms = 0;
  // SYNK_PARTITION_BYTES: a KeyValue key larger than this is reduced a part of this size per
  // cycle (with an Updater: reduced to its owner, then broadcast, a part per cycle), and a
  // cycle starts no more collectives once it has moved this much, so that a key of higher
  // priority pushed meanwhile runs next (0: whole keys, whole cycles).
  std::size_t partition_bytes = std::size_t{4} << 20;

  static KvSettings parse(const EnvGetter& get);
};

inline const KvSettings& kv_settings() { return env::cached<KvSettings>(); }

}  // namespace synk::detail
