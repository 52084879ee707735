// Named device contexts (after Theano's context map): SYNK_CONTEXTS="dev0->cuda0;dev1->cuda1"
// gives each of a rank's visible devices one or more names that user code refers to.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace synk::detail {

struct ContextEntry {
  std::string name;
  int device = 0;  // N of cudaN: an index among the rank's visible devices
};

class ContextMap {
 public:
  ContextMap() = default;
  explicit ContextMap(std::vector<ContextEntry> entries) : entries_(std::move(entries)) {}
  const std::vector<ContextEntry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  std::optional<int> device_of(std::string_view name) const;  // nullopt for an unknown name

 private:
  std::vector<ContextEntry> entries_;  // in the order of the map
};

// Parses a context map, by Theano's rules: entries separated by ';', each NAME->DEVICE (spaces
// around the name and the device are ignored); a name is not empty, not "cpu", does not begin
// with "cuda" or "opencl", and appears once; DEVICE is cudaN with N a non-negative integer
// (openclP:D is refused: synk has no OpenCL). Several names may share a device, and a name may
// map to a device this rank does not see as long as it is not used (the same map serves ranks
// that see different devices). An empty map is valid. Throws synk::Error(InvalidArgument)
// naming the bad entry.
ContextMap parse_contexts(std::string_view spec);

// One line per name, as Theano prints them: "Mapped name dev0 to device cuda0: <device_name(0)>",
// or, for a device at or past visible_devices, "Name dev1 maps to cuda1, which this rank does
// not see (allowed while the name is not used)".
std::vector<std::string> context_mapping_lines(const ContextMap& map, int visible_devices,
                                               const std::function<std::string(int)>& device_name);

// The device `name` maps to. Throws InvalidArgument, the message beginning with `who`, for an
// empty name, "cpu" (the host, not a device) and a name the map does not have (listing those it
// has, or saying that SYNK_CONTEXTS is not set).
int lookup_context(const ContextMap& map, std::string_view name, const std::string& who);

}  // namespace synk::detail
