// synk::device_for and synk::context_names: the public face of SYNK_CONTEXTS. No CUDA here, so
// the lookups work (and are tested) in every build; whether a device is visible is checked
// where memory is placed on it.
#include <string>
#include <vector>

#include "core/contexts.h"
#include "core/env.h"
#include "device/device_settings.h"
#include "synk/device.h"

namespace synk {

int device_for(std::string_view context) {
  // device_settings() checked the map's syntax once; parsing again is cheap and keeps no
  // second copy.
  return detail::lookup_context(detail::parse_contexts(detail::device_settings().contexts), context,
                                "device_for");
}

std::vector<std::string> context_names() {
  const detail::ContextMap map = detail::parse_contexts(detail::device_settings().contexts);
  std::vector<std::string> names;
  for (const detail::ContextEntry& e : map.entries()) names.push_back(e.name);
  return names;
}

}  // namespace synk
