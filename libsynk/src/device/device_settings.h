// Device settings: the named device contexts and the GPU synkrun gave the rank.
#pragma once

#include <string>

#include "core/env.h"

namespace synk::detail {

struct DeviceSettings {
  // SYNK_CONTEXTS: "name->cudaN;...", its syntax checked when read (core/contexts.h), its device
  // numbers once a backend knows them.
  std::string contexts;
  // SYNK_GPU, set by synkrun for the NCCL backend's device choice: the rank's GPU index(es),
  // "2" or "2,3"; empty: none.
  std::string gpu;

  static DeviceSettings parse(const EnvGetter& get);
};

inline const DeviceSettings& device_settings() { return env::cached<DeviceSettings>(); }

}  // namespace synk::detail
