// See device_settings.h.
#include "device/device_settings.h"

#include "core/contexts.h"

namespace synk::detail {

DeviceSettings DeviceSettings::parse(const EnvGetter& get) {
  DeviceSettings s;
  if (const auto v = env::read(get, "SYNK_CONTEXTS")) {
    parse_contexts(v->text);  // the syntax now; the device numbers once a backend knows them
    s.contexts = v->text;
  }
  if (const auto v = env::read(get, "SYNK_GPU")) s.gpu = v->text;
  return s;
}

}  // namespace synk::detail
