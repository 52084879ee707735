// The binding plan of one node: which GPUs, CPUs and NUMA node each local rank gets.
// A pure function of the node's topology, the number of local ranks and the options.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "topology.h"

namespace synk::launch {

enum class BindMode { gpu, numa, core, none };

struct PlanOptions {
  std::optional<BindMode> bind;          // unset: gpu when there is a GPU per rank, else core
  std::optional<std::vector<int>> gpus;  // --gpus: the GPU indexes ranks may use, in this order
  int gpus_per_rank = 1;                 // --gpus-per-rank
};

struct RankPlan {
  int local_rank = 0;
  std::vector<int> gpus;         // GPU indexes (empty: none)
  std::vector<unsigned> cpus;    // OS PU indexes, sorted (empty: not bound)
  std::optional<unsigned> numa;  // OS index of the NUMA node (unset: none or several)
  bool shared = false;           // its cores are shared with other ranks
};

struct Plan {
  BindMode mode = BindMode::none;
  std::vector<RankPlan> ranks;
  std::vector<std::string> notes;  // one line each, for the user (sharing, GPUs left unused...)
};

// A plan that cannot be made (more ranks than GPUs with --bind gpu, a bad --gpus index...).
struct PlanError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// More ranks than this per core on one node is a typo (-np 20000, -H localhost:20000), not a
// job: make_plan refuses it, as mpirun refuses any oversubscription unless told.
inline constexpr int kMaxRanksPerCore = 64;

// The number of ranks when -np is not given: one per usable GPU (with --gpus-per-rank K, one per
// K GPUs). Throws PlanError when the node has no GPU.
int default_rank_count(const NodeTopology& topo, const PlanOptions& options);

Plan make_plan(const NodeTopology& topo, int nranks, const PlanOptions& options);

// A CUDA_VISIBLE_DEVICES that the launching environment already sets (a batch system, a
// container, a user keeping some GPUs for others): synkrun gives every rank its own GPU list,
// so it would quietly use GPUs outside it. On a node with GPUs and without --gpus, the error to
// give (empty: none). `visible` is the variable's value, or null when it is not set.
std::string inherited_visible_devices_error(const char* visible, const NodeTopology& topo,
                                            const PlanOptions& options);

// "0-3,8" <-> {0,1,2,3,8}. parse_list throws PlanError on malformed input.
std::string format_list(const std::vector<unsigned>& values);
std::vector<unsigned> parse_list(const std::string& text);

const char* to_string(BindMode mode);
std::optional<BindMode> parse_bind_mode(const std::string& text);

// The plan as JSON: a list with one object per local rank, keys local_rank, gpu (index or
// null), pci (bus id or null), gpus, cpus (list of OS cpu indexes), numa (OS index or null),
// shared, bind (the mode: gpu, numa, core or none); with several GPUs per rank, "gpu" and "pci"
// hold the first and "gpus" lists them all.
std::string plan_to_json(const Plan& plan, const NodeTopology& topo);

// Human-readable plan, one line per rank.
std::string plan_to_text(const Plan& plan, const NodeTopology& topo);

}  // namespace synk::launch
