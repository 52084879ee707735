// Parsing of SYNK_CONTEXTS (see contexts.h).
#include "core/contexts.h"

#include <cstddef>

#include "synk/error.h"

namespace synk::detail {

namespace {

constexpr std::string_view kSeparator = "->";

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad_entry(std::string_view entry, const std::string& why) {
  throw Error(ErrorCode::InvalidArgument,
              "SYNK_CONTEXTS: entry '" + std::string(entry) + "' " + why);
}

// N of "cudaN", or -1 when the text is not cudaN.
long long device_index(std::string_view device) {
  constexpr std::string_view kPrefix = "cuda";
  if (device.substr(0, kPrefix.size()) != kPrefix) return -1;
  const std::string_view digits = device.substr(kPrefix.size());
  if (digits.empty() || digits.size() > 9) return -1;  // 9 digits keep N an int
  long long n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

std::optional<int> ContextMap::device_of(std::string_view name) const {
  for (const ContextEntry& e : entries_) {
    if (e.name == name) return e.device;
  }
  return std::nullopt;
}

int lookup_context(const ContextMap& map, std::string_view name, const std::string& who) {
  if (trim(name).empty()) {
    throw Error(ErrorCode::InvalidArgument, who + ": the context name is empty");
  }
  if (name == "cpu") {
    throw Error(ErrorCode::InvalidArgument,
                who +
                    ": 'cpu' names the host, not a device context (SYNK_CONTEXTS maps names "
                    "to devices cudaN)");
  }
  if (const std::optional<int> device = map.device_of(name)) return *device;
  if (map.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                who + ": no context named '" + std::string(name) +
                    "': SYNK_CONTEXTS is not set (e.g. SYNK_CONTEXTS=\"" + std::string(name) +
                    "->cuda0\")");
  }
  std::string names;
  for (const ContextEntry& e : map.entries()) names += (names.empty() ? "" : ", ") + e.name;
  throw Error(ErrorCode::InvalidArgument, who + ": no context named '" + std::string(name) +
                                              "' in SYNK_CONTEXTS (it names " + names + ")");
}

std::vector<std::string> context_mapping_lines(const ContextMap& map, int visible_devices,
                                               const std::function<std::string(int)>& device_name) {
  std::vector<std::string> lines;
  for (const ContextEntry& e : map.entries()) {
    const std::string device = "cuda" + std::to_string(e.device);
    lines.push_back(e.device < visible_devices
                        ? "Mapped name " + e.name + " to device " + device + ": " +
                              device_name(e.device)
                        : "Name " + e.name + " maps to " + device +
                              ", which this rank does not see (allowed while the name is not "
                              "used)");
  }
  return lines;
}

ContextMap parse_contexts(std::string_view spec) {
  std::vector<ContextEntry> entries;
  if (trim(spec).empty()) return ContextMap{};
  std::size_t number = 0;
  while (true) {
    const std::size_t semi = spec.find(';');
    const std::string_view raw = spec.substr(0, semi);
    ++number;
    const std::string_view entry = trim(raw);
    if (entry.empty()) {
      throw Error(ErrorCode::InvalidArgument,
                  "SYNK_CONTEXTS: entry " + std::to_string(number) +
                      " is empty (entries are NAME->DEVICE, separated by ';')");
    }
    const std::size_t arrow = entry.find(kSeparator);
    if (arrow == std::string_view::npos) bad_entry(entry, "is not NAME->DEVICE");
    const std::string_view name = trim(entry.substr(0, arrow));
    const std::string_view device = trim(entry.substr(arrow + kSeparator.size()));
    if (name.empty()) bad_entry(entry, "has an empty name");
    if (name == "cpu") bad_entry(entry, "uses the reserved name 'cpu'");
    if (name.substr(0, 4) == "cuda" || name.substr(0, 6) == "opencl") {
      bad_entry(entry, "has a name that begins with 'cuda' or 'opencl' (reserved for devices)");
    }
    if (device.substr(0, 6) == "opencl") {
      bad_entry(entry, "maps to the OpenCL device '" + std::string(device) +
                           "': synk has no OpenCL; map names to CUDA devices cudaN");
    }
    const long long n = device_index(device);
    if (n < 0) {
      bad_entry(entry, "maps to '" + std::string(device) +
                           "', not a device cudaN with N a non-negative integer");
    }
    for (const ContextEntry& e : entries) {
      if (e.name == name) {
        bad_entry(entry, "repeats the name '" + e.name + "' (already mapped to cuda" +
                             std::to_string(e.device) + ")");
      }
    }
    entries.push_back(ContextEntry{std::string(name), static_cast<int>(n)});
    if (semi == std::string_view::npos) break;
    spec.remove_prefix(semi + 1);
  }
  return ContextMap(std::move(entries));
}

}  // namespace synk::detail
