// make_plan: GPUs in order, then CPUs: ranks that share a locality (their first GPU's nearest
// CPU-side object, or a NUMA node: their GPU's, else one that gets ranks in proportion to its
// cores) split its whole cores evenly and disjointly, and share only when it has fewer cores
// than ranks.
#include "topology_plan.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace synk::launch {
namespace {

bool contains_all(const std::vector<unsigned>& sorted_set, const std::vector<unsigned>& items) {
  return std::all_of(items.begin(), items.end(), [&](unsigned x) {
    return std::binary_search(sorted_set.begin(), sorted_set.end(), x);
  });
}

bool contains_any(const std::vector<unsigned>& sorted_set, const std::vector<unsigned>& items) {
  return std::any_of(items.begin(), items.end(), [&](unsigned x) {
    return std::binary_search(sorted_set.begin(), sorted_set.end(), x);
  });
}

// The cores inside a locality: those wholly inside, else those touching it, else all.
std::vector<const Core*> cores_within(const NodeTopology& topo, const std::vector<unsigned>& cpus) {
  std::vector<const Core*> inside, touching, all;
  for (const Core& c : topo.cores) {
    all.push_back(&c);
    if (contains_all(cpus, c.pus)) inside.push_back(&c);
    if (contains_any(cpus, c.pus)) touching.push_back(&c);
  }
  if (!inside.empty()) return inside;
  if (!touching.empty()) return touching;
  return all;
}

std::string rank_range(const std::vector<int>& ranks) {
  std::vector<unsigned> u(ranks.begin(), ranks.end());
  return format_list(u);
}

// Splits the cores among the ranks (indexes into plan.ranks), in order: whole cores, evenly
// and disjointly; when there are fewer cores than ranks, consecutive ranks share a core.
void split_cores(const std::vector<const Core*>& cores, const std::vector<int>& ranks, Plan& plan) {
  const std::size_t c = cores.size(), m = ranks.size();
  if (m == 0 || c == 0) return;
  if (c >= m) {
    const std::size_t base = c / m, extra = c % m;
    std::size_t next = 0;
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t take = base + (i < extra ? 1 : 0);
      auto& cpus = plan.ranks[static_cast<std::size_t>(ranks[i])].cpus;
      for (std::size_t k = 0; k < take; ++k, ++next) {
        cpus.insert(cpus.end(), cores[next]->pus.begin(), cores[next]->pus.end());
      }
      std::sort(cpus.begin(), cpus.end());
    }
    return;
  }
  std::vector<unsigned> all_pus;
  std::vector<int> ranks_on(c, 0);
  for (std::size_t i = 0; i < m; ++i) ++ranks_on[i * c / m];
  for (std::size_t i = 0; i < m; ++i) {
    RankPlan& r = plan.ranks[static_cast<std::size_t>(ranks[i])];
    r.cpus = cores[i * c / m]->pus;
    r.shared = ranks_on[i * c / m] > 1;  // (3 ranks on 2 cores: the third has its own)
  }
  for (const Core* core : cores) all_pus.insert(all_pus.end(), core->pus.begin(), core->pus.end());
  std::sort(all_pus.begin(), all_pus.end());
  // Ranks with GPUs keep to the cores nearest them, though other cores may be idle.
  const bool near_gpus = !plan.ranks[static_cast<std::size_t>(ranks.front())].gpus.empty();
  plan.notes.push_back("local ranks " + rank_range(ranks) + " share " + std::to_string(c) +
                       (c == 1 ? " core" : " cores") + " (cpus " + format_list(all_pus) +
                       "): fewer cores than ranks" + (near_gpus ? " near their GPUs" : ""));
}

std::vector<int> usable_gpus(const NodeTopology& topo, const PlanOptions& options) {
  const int n = static_cast<int>(topo.gpus.size());
  if (!options.gpus) {
    std::vector<int> all(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
    return all;
  }
  std::set<int> seen;
  for (int g : *options.gpus) {
    if (g < 0 || g >= n) {
      throw PlanError("--gpus: GPU " + std::to_string(g) + " does not exist (the node has " +
                      std::to_string(n) + (n == 1 ? " GPU" : " GPUs") + ")");
    }
    if (!seen.insert(g).second) {
      throw PlanError("--gpus: GPU " + std::to_string(g) + " is listed twice");
    }
  }
  return *options.gpus;
}

// NUMA nodes that have cores, each with the cores nearest it (numa_of_cores: a node with memory
// only gets none); a single unnamed group when there is none.
struct NumaGroup {
  std::optional<unsigned> os_index;
  std::vector<unsigned> pus;
  std::vector<const Core*> cores;
};

std::vector<NumaGroup> numa_groups(const NodeTopology& topo) {
  std::vector<NumaGroup> groups;
  const std::vector<int> owner = numa_of_cores(topo);
  for (std::size_t j = 0; j < topo.numas.size(); ++j) {
    NumaGroup g{topo.numas[j].os_index, topo.numas[j].pus, {}};
    for (std::size_t i = 0; i < topo.cores.size(); ++i) {
      if (owner[i] == static_cast<int>(j)) g.cores.push_back(&topo.cores[i]);
    }
    if (!g.cores.empty()) groups.push_back(std::move(g));
  }
  if (groups.empty()) {
    NumaGroup g;
    for (const Core& c : topo.cores) {
      g.cores.push_back(&c);
      g.pus.insert(g.pus.end(), c.pus.begin(), c.pus.end());
    }
    std::sort(g.pus.begin(), g.pus.end());
    groups.push_back(std::move(g));
  }
  return groups;
}

bool locality_has_a_core(const NodeTopology& topo, const std::vector<unsigned>& cpus) {
  return std::any_of(topo.cores.begin(), topo.cores.end(),
                     [&](const Core& c) { return contains_any(cpus, c.pus); });
}

// The cores near a GPU may all be outside the job's (a cpuset on the other socket): its ranks
// run on the cores the job has, across the machine from their GPU.
void note_gpus_without_near_cores(const NodeTopology& topo, const std::vector<int>& ranks,
                                  Plan& plan) {
  std::string gpus;
  for (int r : ranks) {
    const Gpu& g = topo.gpus[static_cast<std::size_t>(plan.ranks[static_cast<std::size_t>(r)]
                                                          .gpus.front())];
    gpus += (gpus.empty() ? "" : ", ") + std::to_string(g.index) + " (" + g.pci + ")";
  }
  plan.notes.push_back((ranks.size() == 1 ? "local rank " : "local ranks ") + rank_range(ranks) +
                       ": none of the cores this job may use is near " +
                       (ranks.size() == 1 ? "its GPU " : "their GPUs ") + gpus +
                       "; bound to (a share of) the cores the job may use, across the machine "
                       "from the GPU (see what keeps the job off them: taskset, a cgroup cpuset, "
                       "the batch system)");
}

void plan_gpu_locality(const NodeTopology& topo, Plan& plan) {
  // Ranks whose first GPUs share a locality form a group, which splits that locality's cores.
  // (By the union of all a rank's GPUs' localities, a rank whose GPUs spanned two sockets made
  // a group of its own over both, and got cores the two sockets' groups also got, unflagged.)
  std::map<std::vector<unsigned>, std::vector<int>> by_locality;
  for (RankPlan& r : plan.ranks) {
    std::set<std::optional<unsigned>> numas;
    for (int g : r.gpus) numas.insert(topo.gpus[static_cast<std::size_t>(g)].numa);
    if (numas.size() == 1) r.numa = *numas.begin();
    const std::vector<unsigned>& first = topo.gpus[static_cast<std::size_t>(r.gpus.front())].cpus;
    by_locality[std::vector<unsigned>(first.begin(), first.end())].push_back(r.local_rank);
  }
  // Localities may still overlap (one GPU's may hold another's): the narrower ones choose
  // first, and a group takes only cores no earlier group took. One left with none shares its
  // locality's cores with the others, and says so.
  std::vector<const std::vector<unsigned>*> keys;
  for (const auto& [key, ranks] : by_locality) keys.push_back(&key);
  std::stable_sort(keys.begin(), keys.end(),
                   [](const auto* a, const auto* b) { return a->size() < b->size(); });
  std::set<const Core*> taken;
  for (const std::vector<unsigned>* key : keys) {
    const std::vector<int>& ranks = by_locality[*key];
    const std::vector<const Core*> near = cores_within(topo, *key);
    if (!locality_has_a_core(topo, *key)) note_gpus_without_near_cores(topo, ranks, plan);
    std::vector<const Core*> free;
    for (const Core* c : near) {
      if (!taken.count(c)) free.push_back(c);
    }
    if (free.empty()) {
      split_cores(near, ranks, plan);
      for (int r : ranks) plan.ranks[static_cast<std::size_t>(r)].shared = true;
      plan.notes.push_back("local ranks " + rank_range(ranks) +
                           " share cores with other ranks: the cores nearest their GPUs are "
                           "all taken");
      continue;
    }
    split_cores(free, ranks, plan);
    taken.insert(free.begin(), free.end());
  }
}

// How many of m ranks each NUMA group gets: in proportion to its cores (largest remainders
// first, ties to the earlier group), so that ranks share a core only when the node has fewer
// cores than ranks. (An even split put 2 ranks on a NUMA node of 1 allowed core beside one of 3
// with a core left idle.)
std::vector<std::size_t> ranks_per_group(const std::vector<NumaGroup>& groups, std::size_t m) {
  std::size_t total = 0;
  for (const NumaGroup& g : groups) total += g.cores.size();
  std::vector<std::size_t> count(groups.size());
  std::vector<std::pair<std::size_t, std::size_t>> remainder;  // (remainder, group)
  std::size_t given = 0;
  for (std::size_t j = 0; j < groups.size(); ++j) {
    const std::size_t share = m * groups[j].cores.size();
    count[j] = share / total;
    given += count[j];
    remainder.emplace_back(share % total, j);
  }
  std::stable_sort(remainder.begin(), remainder.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; given < m; ++i, ++given) ++count[remainder[i % remainder.size()].second];
  return count;
}

// The NUMA group each rank goes to: a rank with a GPU to its GPU's NUMA node, the others (no
// GPU, or one whose NUMA node is not known) spread in proportion to the groups' cores.
std::vector<std::vector<int>> ranks_by_numa_group(const NodeTopology& topo,
                                                  const std::vector<NumaGroup>& groups,
                                                  const Plan& plan) {
  std::vector<std::vector<int>> members(groups.size());
  std::vector<int> spread;
  for (const RankPlan& r : plan.ranks) {
    std::optional<unsigned> numa;
    if (!r.gpus.empty()) numa = topo.gpus[static_cast<std::size_t>(r.gpus.front())].numa;
    const auto at = std::find_if(groups.begin(), groups.end(),
                                 [&](const NumaGroup& g) { return numa && g.os_index == numa; });
    if (at == groups.end()) {
      spread.push_back(r.local_rank);
    } else {
      members[static_cast<std::size_t>(at - groups.begin())].push_back(r.local_rank);
    }
  }
  const std::vector<std::size_t> counts = ranks_per_group(groups, spread.size());
  std::size_t next = 0;
  for (std::size_t j = 0; j < groups.size(); ++j) {
    for (std::size_t k = 0; k < counts[j]; ++k) members[j].push_back(spread[next++]);
    std::sort(members[j].begin(), members[j].end());
  }
  return members;
}

// --bind core (whole cores, disjoint) or numa (the whole NUMA node, which the ranks placed on
// it share) within each rank's NUMA group.
void plan_numa_spread(const NodeTopology& topo, bool whole_node, Plan& plan) {
  const std::vector<NumaGroup> groups = numa_groups(topo);
  const std::vector<std::vector<int>> members = ranks_by_numa_group(topo, groups, plan);
  for (std::size_t j = 0; j < groups.size(); ++j) {
    const std::vector<int>& ranks = members[j];
    for (int r : ranks) plan.ranks[static_cast<std::size_t>(r)].numa = groups[j].os_index;
    if (!whole_node) {
      split_cores(groups[j].cores, ranks, plan);
      continue;
    }
    for (int r : ranks) {
      RankPlan& rank = plan.ranks[static_cast<std::size_t>(r)];
      rank.cpus = groups[j].pus;
      rank.shared = ranks.size() > 1;
    }
    if (ranks.size() > 1) {
      plan.notes.push_back("local ranks " + rank_range(ranks) + " share the cores of NUMA node " +
                           (groups[j].os_index ? std::to_string(*groups[j].os_index) : "-") +
                           " (cpus " + format_list(groups[j].pus) + ", --bind numa)");
    }
  }
}

// Every GPU but a remainder in use, --gpus-per-rank not dividing them: say which stay idle (a
// smaller -np leaves GPUs idle by the user's choice, unnoted).
void note_gpus_left_by_gpus_per_rank(const std::vector<int>& gpus, int nranks, int k,
                                     Plan& plan) {
  const std::size_t used = static_cast<std::size_t>(nranks) * static_cast<std::size_t>(k);
  if (k < 2 || used >= gpus.size() || static_cast<std::size_t>(nranks) != gpus.size() / k) return;
  const std::vector<unsigned> idle(gpus.begin() + static_cast<std::ptrdiff_t>(used), gpus.end());
  plan.notes.push_back((idle.size() == 1 ? "GPU " : "GPUs ") + format_list(idle) +
                       " left unused: " + std::to_string(gpus.size()) +
                       " GPUs do not divide by --gpus-per-rank " + std::to_string(k));
}

}  // namespace

int default_rank_count(const NodeTopology& topo, const PlanOptions& options) {
  const int usable = static_cast<int>(usable_gpus(topo, options).size());
  const int k = std::max(1, options.gpus_per_rank);
  if (usable / k == 0) {
    throw PlanError(topo.gpus.empty()
                        ? "no GPU found on this node: give the number of ranks with -np N"
                        : "fewer GPUs (" + std::to_string(usable) + ") than --gpus-per-rank " +
                              std::to_string(k) + ": give the number of ranks with -np N");
  }
  return usable / k;
}

std::string inherited_visible_devices_error(const char* visible, const NodeTopology& topo,
                                            const PlanOptions& options) {
  if (visible == nullptr || *visible == '\0' || topo.gpus.empty() || options.gpus) return {};
  return std::string("CUDA_VISIBLE_DEVICES=") + visible +
         " is set, but synkrun gives each rank its own GPUs (CUDA_VISIBLE_DEVICES per rank, in "
         "PCI bus-id order) and would not keep to it; say which GPUs ranks may use with --gpus "
         "LIST (indexes in PCI bus-id order: synkrun --dry-run lists them), or unset it";
}

Plan make_plan(const NodeTopology& topo, int nranks, const PlanOptions& options) {
  if (nranks < 1)
    throw PlanError("the number of ranks must be at least 1, not " + std::to_string(nranks));
  const long long cores = static_cast<long long>(topo.cores.size());
  if (cores > 0 && nranks > kMaxRanksPerCore * cores) {
    throw PlanError(std::to_string(nranks) + " ranks on a node of " + std::to_string(cores) +
                    " cores: more than " + std::to_string(kMaxRanksPerCore) +
                    " ranks per core; spread them over more hosts");
  }
  const int k = options.gpus_per_rank;
  if (k < 1) throw PlanError("--gpus-per-rank must be at least 1, not " + std::to_string(k));
  const std::vector<int> gpus = usable_gpus(topo, options);

  Plan plan;
  plan.mode = options.bind.value_or(gpus.empty() ? BindMode::core : BindMode::gpu);
  plan.ranks.resize(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r) plan.ranks[static_cast<std::size_t>(r)].local_rank = r;

  const long need = static_cast<long>(nranks) * k;
  if (need <= static_cast<long>(gpus.size())) {
    for (int r = 0; r < nranks; ++r) {
      auto& mine = plan.ranks[static_cast<std::size_t>(r)].gpus;
      for (int i = 0; i < k; ++i) mine.push_back(gpus[static_cast<std::size_t>(r * k + i)]);
    }
    note_gpus_left_by_gpus_per_rank(gpus, nranks, k, plan);
  } else if (options.bind == BindMode::gpu) {
    throw PlanError(std::to_string(nranks) + (nranks == 1 ? " rank" : " ranks") +
                    (k > 1 ? " with " + std::to_string(k) + " GPUs each" : "") + " but " +
                    (options.gpus ? "--gpus lists " : "the node has ") +
                    std::to_string(gpus.size()) + (gpus.size() == 1 ? " GPU" : " GPUs") +
                    (gpus.empty() ? " (--bind gpu): use --bind core"
                                  : " (--bind gpu): use fewer ranks, or --bind core"));
  } else if (!gpus.empty()) {
    // By default a job with more ranks than GPUs still runs (a CPU program on a GPU node, `make
    // run` on a one-GPU workstation), bound to cores; --bind gpu asks for the error above.
    const bool fell_back = plan.mode == BindMode::gpu;
    if (fell_back) plan.mode = BindMode::core;
    plan.notes.push_back(std::to_string(nranks) + (nranks == 1 ? " rank needs " : " ranks need ") +
                         std::to_string(need) + " GPUs, " +
                         (options.gpus ? "--gpus lists " : "the node offers ") +
                         std::to_string(gpus.size()) +
                         ": ranks get no GPU" +
                         (fell_back ? " and are bound to cores (--bind gpu makes this an error)"
                                    : ""));
  } else if (k != 1) {  // (a --gpus list names GPUs that do not exist: usable_gpus refused it)
    plan.notes.push_back("the node has no GPU: --gpus-per-rank has no effect");
  }

  switch (plan.mode) {
    case BindMode::none:
      break;
    case BindMode::gpu:
      plan_gpu_locality(topo, plan);
      break;
    case BindMode::core:
      plan_numa_spread(topo, false, plan);
      break;
    case BindMode::numa:
      plan_numa_spread(topo, true, plan);
      break;
  }
  return plan;
}

std::string format_list(const std::vector<unsigned>& values) {
  std::vector<unsigned> v = values;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]);
    if (j > i) out += '-' + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

std::vector<unsigned> parse_list(const std::string& text) {
  auto bad = [&]() { return PlanError("bad list \"" + text + "\": expected e.g. 0-3,8"); };
  auto number = [&](std::string_view s) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) throw bad();
    return v;
  };
  std::vector<unsigned> out;
  std::string_view rest = text;
  if (rest.empty()) throw bad();
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      out.push_back(number(item));
    } else {
      const unsigned lo = number(item.substr(0, dash)), hi = number(item.substr(dash + 1));
      if (hi < lo || hi - lo > 1u << 20) throw bad();
      for (unsigned v = lo; v <= hi; ++v) out.push_back(v);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

const char* to_string(BindMode mode) {
  switch (mode) {
    case BindMode::gpu:
      return "gpu";
    case BindMode::numa:
      return "numa";
    case BindMode::core:
      return "core";
    case BindMode::none:
      return "none";
  }
  return "?";
}

std::optional<BindMode> parse_bind_mode(const std::string& text) {
  for (BindMode m : {BindMode::gpu, BindMode::numa, BindMode::core, BindMode::none}) {
    if (text == to_string(m)) return m;
  }
  return std::nullopt;
}

std::string plan_to_json(const Plan& plan, const NodeTopology& topo) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const RankPlan& r : plan.ranks) {
    nlohmann::ordered_json j;
    j["local_rank"] = r.local_rank;
    j["gpu"] =
        r.gpus.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.gpus.front());
    j["pci"] =
        r.gpus.empty()
            ? nlohmann::ordered_json(nullptr)
            : nlohmann::ordered_json(topo.gpus[static_cast<std::size_t>(r.gpus.front())].pci);
    j["gpus"] = r.gpus;
    j["cpus"] = r.cpus;
    j["numa"] = r.numa ? nlohmann::ordered_json(*r.numa) : nlohmann::ordered_json(nullptr);
    j["shared"] = r.shared;
    j["bind"] = to_string(plan.mode);
    out.push_back(std::move(j));
  }
  // One rank per line: readable, and still one JSON document.
  std::string text = "[";
  for (std::size_t i = 0; i < out.size(); ++i) text += (i ? ",\n  " : "\n  ") + out[i].dump();
  return text + "\n]";
}

std::string plan_to_text(const Plan& plan, const NodeTopology& topo) {
  std::ostringstream os;
  os << "plan: " << plan.ranks.size() << " local " << (plan.ranks.size() == 1 ? "rank" : "ranks")
     << ", bind " << to_string(plan.mode) << ", node has " << topo.gpus.size() << " GPUs, "
     << topo.cores.size() << " cores, " << topo.numas.size() << " NUMA nodes\n";
  for (const RankPlan& r : plan.ranks) {
    os << "  local rank " << r.local_rank << ": gpu ";
    if (r.gpus.empty()) {
      os << "-";
    } else {
      for (std::size_t i = 0; i < r.gpus.size(); ++i) {
        const Gpu& g = topo.gpus[static_cast<std::size_t>(r.gpus[i])];
        os << (i ? "," : "") << g.index << " (" << g.pci << ")";
      }
    }
    os << ", cpus " << (r.cpus.empty() ? "unbound" : format_list(r.cpus)) << ", numa "
       << (r.numa ? std::to_string(*r.numa) : "-") << (r.shared ? " (shared)" : "") << "\n";
  }
  for (const std::string& note : plan.notes) os << "note: " << note << "\n";
  return os.str();
}

}  // namespace synk::launch
