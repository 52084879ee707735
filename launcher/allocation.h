// A resource manager's allocation (Slurm, PBS, LSF) as synkrun sees it from the environment of
// salloc's (qsub's, bsub's) shell. Inside one, mpirun reads the allocation and spreads the ranks
// over its nodes without -H or a hostfile: synkrun must then plan only its own node's share, as
// it does with -H, not put every rank on the node it runs on.
#pragma once

#include <functional>
#include <string>

namespace synk::launch {

struct Allocation {
  std::string manager;  // "Slurm", "PBS", "LSF", or "" where there is none
  int nodes = 0;        // how many nodes it holds
};

// The allocation this process runs in, from its environment (getenv) and, for PBS, the node file
// it names. `nodes` is 0 where there is none or it cannot be read.
Allocation find_allocation(const std::function<const char*(const char*)>& getenv);

}  // namespace synk::launch
