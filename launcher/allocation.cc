// See allocation.h.
#include "allocation.h"

#include <fstream>
#include <set>
#include <sstream>

#include "hosts.h"

namespace synk::launch {

namespace {

// Slurm's node count (SLURM_JOB_NUM_NODES, or the older SLURM_NNODES).
int slurm_nodes(const std::function<const char*(const char*)>& getenv) {
  for (const char* var : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}) {
    const char* text = getenv(var);
    if (text == nullptr) continue;
    if (const std::optional<int> n = parse_count(text, kMaxRanks)) return *n;
  }
  return 0;
}

// PBS's node file holds a line per slot: its distinct host names are the nodes.
int pbs_nodes(const char* node_file) {
  std::ifstream in(node_file);
  std::set<std::string> hosts;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    if (std::string host; words >> host) hosts.insert(host);
  }
  return static_cast<int>(hosts.size());
}

// LSF's LSB_MCPU_HOSTS is "host1 slots1 host2 slots2 ...".
int lsf_nodes(const char* hosts_and_slots) {
  std::istringstream words(hosts_and_slots);
  std::set<std::string> hosts;
  for (std::string host, slots; words >> host >> slots;) hosts.insert(host);
  return static_cast<int>(hosts.size());
}

bool is_set(const char* value) { return value != nullptr && *value != '\0'; }

}  // namespace

Allocation find_allocation(const std::function<const char*(const char*)>& getenv) {
  if (is_set(getenv("SLURM_JOB_ID")) || is_set(getenv("SLURM_JOBID"))) {
    return {"Slurm", slurm_nodes(getenv)};
  }
  if (const char* node_file = getenv("PBS_NODEFILE"); is_set(node_file)) {
    return {"PBS", pbs_nodes(node_file)};
  }
  if (const char* hosts = getenv("LSB_MCPU_HOSTS"); is_set(hosts)) return {"LSF", lsf_nodes(hosts)};
  return {};
}

}  // namespace synk::launch
