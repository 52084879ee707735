// See device_settings.h.
#include "device/device_settings.h"

#include <charconv>
#include <string_view>

#include "core/contexts.h"

namespace synk::detail {

namespace {

// SYNK_GPU: "2" or "2,3", each item a GPU index in digits (as synkrun writes it, and as the
// nccl backend reads it: device_choice.cc).
void check_gpu_list(const env::Value& v) {
  std::string_view rest = v.text;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    int index = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
    if (item.empty() || item[0] == '-' || ec != std::errc() ||
        end != item.data() + item.size()) {
      env::bad(v, "a GPU index or a comma-separated list of them");
    }
    if (comma == std::string_view::npos) return;
    rest.remove_prefix(comma + 1);
  }
}

}  // namespace

DeviceSettings DeviceSettings::parse(const EnvGetter& get) {
  DeviceSettings s;
  if (const auto v = env::read(get, "SYNK_CONTEXTS")) {
    parse_contexts(v->text);  // the syntax now; the device numbers once a backend knows them
    s.contexts = v->text;
  }
  if (const auto v = env::read(get, "SYNK_GPU")) {
    check_gpu_list(*v);
    s.gpu = v->text;
  }
  return s;
}

}  // namespace synk::detail
