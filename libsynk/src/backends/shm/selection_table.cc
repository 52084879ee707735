// See selection_table.h.
#include "backends/shm/selection_table.h"

#include <cstdio>
#include <string>

namespace synk::shm {

namespace {

std::string size_text(int size_class) {
  const std::size_t bytes = std::size_t{1} << size_class;
  if (bytes >= (std::size_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (std::size_t{1} << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string stores_text(const StoreTuner& stores, detail::Collective c, std::size_t bytes) {
  const StoreTuner::Arms& a = stores.arms(static_cast<int>(c), bytes);
  if (a.calls == 0 || (a.cost[0] == 0 && a.cost[1] == 0)) return "-";
  return a.favoured == 1 ? "streaming" : "ordinary";
}

}  // namespace

std::string selection_table(const AlgoChooser& chooser, const StoreTuner& stores, int ranks) {
  std::string out;
  char line[200];
  for (detail::Collective c : kChosenCollectiveList) {
    if (const auto forced = chooser.forced(c)) {
      std::snprintf(line, sizeof line, "  %-14s %5d  %9s  %-5s %-8s  %9s  %9s  %s\n",
                    detail::to_string(c), ranks, "all", to_string(*forced), "forced", "-", "-",
                    "-");
      out += line;
      continue;
    }
    for (int k = 0; k < AlgoChooser::kSizeClasses; ++k) {
      const std::size_t bytes = std::size_t{1} << k;
      const AlgoChooser::State& s = chooser.state(c, bytes);
      if (!s.decided) continue;
      std::snprintf(line, sizeof line, "  %-14s %5d  %8s+  %-5s %-8s  %9.1f  %9.1f  %s\n",
                    detail::to_string(c), ranks, size_text(k).c_str(), to_string(s.chosen),
                    "measured", s.agreed[0] * 1e6, s.agreed[1] * 1e6,
                    stores_text(stores, c, bytes).c_str());
      out += line;
    }
  }
  if (out.empty()) return out;
  return "  collective     ranks   per rank  way   chosen    slots(us)    cma(us)  stores\n" + out;
}

}  // namespace synk::shm
