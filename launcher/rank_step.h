// The rank step: what synkrun runs on every rank (under mpirun, or srun). It finds its local
// rank, plans the node, binds itself, exports SYNK_* and CUDA_* variables and execs PROGRAM.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "options.h"

namespace synk::launch {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
  int node_rank = 0;
  std::string source;  // which launcher's variables were found: "openmpi", "hydra", "slurm",
                       // "pmi", or "none" (a single process started by hand)
};

// The SYNK_* variables the rank step sets on each rank (the layout and binding it computes):
// a launcher forwards none of them from where it starts.
inline constexpr const char* kRankStepVariables[] = {
    "SYNK_RANK", "SYNK_WORLD_SIZE", "SYNK_LOCAL_RANK", "SYNK_LOCAL_SIZE",
    "SYNK_NODE_RANK", "SYNK_GPU", "SYNK_CPUS"};

using GetEnv = std::function<const char*(const char*)>;

// Reads the rank layout from the launcher's variables (OMPI_COMM_WORLD_*, MPI_LOCALRANKID /
// PMI_*, SLURM_*, PMI_LOCAL_*). Throws std::runtime_error when they are inconsistent.
RankEnv read_rank_env(const GetEnv& get);

// Slurm's "2(x3),1" task counts per node: the count of node `node` (0-based), or nullopt.
std::optional<int> slurm_tasks_on_node(const std::string& tasks_per_node, int node);

// Runs the rank step; returns only on failure, with the exit code (2: bad plan, 126/127: the
// program cannot be run).
int run_rank_step(const Options& options);

}  // namespace synk::launch
