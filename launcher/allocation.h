// A Slurm allocation as synkrun sees it from the environment of salloc's shell (or an srun
// step's). Inside one, mpirun reads the allocation and spreads the ranks over its nodes without
// -H or a hostfile: synkrun must then plan only its own node's share, as it does with -H, not
// put every rank on the node it runs on. (PBS and LSF allocations are read only by an mpirun
// built with their support, which Debian's is not: there -H or --hostfile says the hosts.)
#pragma once

#include <functional>
#include <string>

namespace synk::launch {

struct Allocation {
  std::string manager;  // "Slurm", or "" where there is none
  int nodes = 0;        // how many nodes it holds
};

// The allocation this process runs in, from its environment (getenv). `nodes` is 0 where there
// is none or it cannot be read.
Allocation find_allocation(const std::function<const char*(const char*)>& getenv);

}  // namespace synk::launch
