// See shm_settings.h.
#include "backends/shm/shm_settings.h"

namespace synk::detail {

ShmSettings ShmSettings::parse(const EnvGetter& get) {
  using namespace env;
  ShmSettings s;
  const auto var = [&](const char* name) { return read(get, name); };
  if (const auto v = var("SYNK_SHM_SLOT_BYTES")) {
    // A multiple of 4096 keeps every slot page- and cache-line-aligned.
    const long long b = integer(*v, 4096, 1LL << 30);
    if (b % 4096 != 0) bad(*v, "a multiple of 4096");
    s.slot_bytes = static_cast<std::size_t>(b);
  }
  if (const auto v = var("SYNK_SHM_CMA_BYTES")) s.cma_bytes = integer(*v, 0, 1LL << 50);
  if (const auto v = var("SYNK_SHM_ONE_STEP_BYTES")) s.one_step_bytes = integer(*v, 0, 1LL << 30);
  if (const auto v = var("SYNK_SHM_ROOT_REDUCES_BYTES")) {
    s.root_reduces_bytes = integer(*v, 0, 1LL << 50);
  }
  if (const auto v = var("SYNK_SHM_SPIN_US")) s.spin_us = integer(*v, 0, 60000000);
  if (const auto v = var("SYNK_SHM_STREAM")) {
    const std::string m = one_of(*v, {"auto", "always", "never"}, "auto, always or never");
    s.store_mode = m == "always"  ? shm::StoreMode::streaming
                   : m == "never" ? shm::StoreMode::ordinary
                                  : shm::StoreMode::tuned;
  }
  if (const auto v = var("SYNK_SHM_SEGMENTS")) {
    s.named_segments_only = one_of(*v, {"auto", "named"}, "auto or named") == "named";
  }
  if (const auto v = var("SYNK_SHM_ALGO")) s.forced_algos = shm::parse_forced_algos(v->text);
  return s;
}

}  // namespace synk::detail
