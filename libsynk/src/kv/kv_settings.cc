// See kv_settings.h.
#include "kv/kv_settings.h"

namespace synk::detail {

KvSettings KvSettings::parse(const EnvGetter& get) {
  KvSettings s;
  if (const auto v = env::read(get, "SYNK_FUSION_BYTES")) {
    s.fusion_bytes = static_cast<std::size_t>(env::integer(*v, 0, 1LL << 40));
  }
  if (const auto v = env::read(get, "SYNK_CYCLE_MS")) {
    s.cycle_ms = static_cast<int>(env::integer(*v, 0, 10000));
  }
  if (const auto v = env::read(get, "SYNK_PARTITION_BYTES")) {
    s.partition_bytes = static_cast<std::size_t>(env::integer(*v, 0, 1LL << 40));
  }
  return s;
}

}  // namespace synk::detail
