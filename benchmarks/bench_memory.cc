// See bench_memory.h.
#include "bench_memory.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "backends/shm/cpu_share.h"      // read_file_text
#include "backends/shm/segment_share.h"  // cgroup_memory_room, meminfo_bytes

namespace synk::bench {

namespace {

constexpr std::uint64_t kUnknown = std::numeric_limits<std::uint64_t>::max();

// "12.0 GiB": the size a reader takes in at a glance, beside the exact bytes.
std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1u << 30));
  return text;
}

}  // namespace

std::uint64_t available_memory(const std::string& meminfo, std::uint64_t cgroup_room) {
  const std::optional<std::uint64_t> available = shm::meminfo_bytes(meminfo, "MemAvailable");
  // Without MemAvailable, the cgroup's room (kUnknown too where no cgroup limits).
  return available ? std::min(*available, cgroup_room) : cgroup_room;
}

std::uint64_t available_memory() {
  const std::uint64_t room =
      shm::cgroup_memory_room(shm::read_file_text("/proc/self/cgroup"), "/sys/fs/cgroup");
  return available_memory(shm::read_file_text("/proc/meminfo"), room);
}

std::string memory_shortfall(std::uint64_t per_rank, int ranks_on_node, std::uint64_t available) {
  const auto ranks = static_cast<std::uint64_t>(std::max(ranks_on_node, 1));
  const std::uint64_t need = per_rank > kUnknown / ranks ? kUnknown : per_rank * ranks;
  if (available == kUnknown || need <= available) return "";
  std::string text =
      "host buffers of " + std::to_string(per_rank) + " bytes per rank (" + gib(per_rank) + ")";
  if (ranks > 1) {
    text += ", " + std::to_string(need) + " (" + gib(need) + ") for the " + std::to_string(ranks) +
            " ranks on this node,";
  }
  return text + " do not fit in the " + std::to_string(available) + " bytes (" + gib(available) +
         ") of memory available (MemAvailable, within the cgroup's limit)";
}

}  // namespace synk::bench
