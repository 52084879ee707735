// See allocation.h.
#include "allocation.h"

#include "hosts.h"

namespace synk::launch {

namespace {

bool is_set(const char* value) { return value != nullptr && *value != '\0'; }

// Slurm's node count: the step's inside one (srun -n1 synkrun, where mpirun gets the step's
// nodes), else the job's (salloc's shell). The older names are read too.
int slurm_nodes(const std::function<const char*(const char*)>& getenv) {
  const auto count = [&](const char* var) -> std::optional<int> {
    const char* text = getenv(var);
    return text != nullptr ? parse_count(text, kMaxRanks) : std::nullopt;
  };
  if (is_set(getenv("SLURM_STEP_ID"))) {
    if (const auto n = count("SLURM_STEP_NUM_NODES")) return *n;
  }
  for (const char* var : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}) {
    if (const auto n = count(var)) return *n;
  }
  return 0;
}

}  // namespace

Allocation find_allocation(const std::function<const char*(const char*)>& getenv) {
  if (is_set(getenv("SLURM_JOB_ID")) || is_set(getenv("SLURM_JOBID"))) {
    return {"Slurm", slurm_nodes(getenv)};
  }
  return {};
}

}  // namespace synk::launch
