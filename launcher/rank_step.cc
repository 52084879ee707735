// The rank step on each rank: layout from the launcher's environment, the node's plan (every
// rank of a node computes the same one), binding, exported variables, then exec of PROGRAM.
#include "rank_step.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "hosts.h"
#include "topology.h"
#include "topology_export.h"
#include "topology_plan.h"

namespace synk::launch {
namespace {

std::optional<int> to_int(const char* s) {
  if (s == nullptr || *s == '\0') return std::nullopt;
  int v = 0;
  const char* end = s + std::strlen(s);
  auto [p, ec] = std::from_chars(s, end, v);
  if (ec != std::errc() || p != end) return std::nullopt;
  return v;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::vector<unsigned> current_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<unsigned> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (unsigned i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) out.push_back(i);
  }
  return out;
}

std::string join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) {
    if (!out.empty()) out += ',';
    out += std::to_string(x);
  }
  return out;
}

}  // namespace

std::optional<int> slurm_tasks_on_node(const std::string& text, int node) {
  // Items "N" or "N(xR)", comma-separated, covering consecutive nodes.
  int first = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    int count = 0, repeat = 1;
    const std::size_t paren = item.find("(x");
    const auto c = to_int(item.substr(0, paren).c_str());
    if (!c) return std::nullopt;
    count = *c;
    if (paren != std::string::npos) {
      if (item.back() != ')') return std::nullopt;
      const auto r = to_int(item.substr(paren + 2, item.size() - paren - 3).c_str());
      if (!r || *r < 1) return std::nullopt;
      repeat = *r;
    }
    if (node < first + repeat) return count;
    first += repeat;
    pos = end + 1;
  }
  return std::nullopt;
}

namespace {

// One launcher's variables for a rank's place: its local rank (whose presence names the
// launcher), rank, size and local size. Slurm gives the local size per node instead.
struct LauncherVariables {
  const char* source;
  const char* local_rank;
  const char* rank;
  const char* size;
  const char* local_size;  // nullptr: Slurm's task counts per node
};

// In the order tried: under mpirun inside a Slurm allocation a rank has both Open MPI's
// variables and those srun gave mpirun's daemon, and Open MPI's are the rank's own.
constexpr LauncherVariables kLaunchers[] = {
    {"openmpi", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"hydra", "MPI_LOCALRANKID", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"},
    {"slurm", "SLURM_LOCALID", "SLURM_PROCID", "SLURM_NTASKS", nullptr},
    {"pmi", "PMI_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "PMI_LOCAL_SIZE"},
};

// Variables of launchers the rank step cannot read: with one of them set, every rank would
// think itself rank 0 of 1 and take the same GPU and cores.
constexpr const char* kForeignRankVariables[] = {"PMIX_RANK", "FLUX_TASK_RANK", "LOCAL_RANK",
                                                 "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                                 "SLURM_PROCID"};

// The whole number in variable `name`; throws naming the variable when it is unset or not one.
int required_number(const GetEnv& get, const char* name, const std::string& source) {
  const char* text = get(name);
  if (text == nullptr) {
    throw std::runtime_error("the " + source + " launcher set a local rank but not " + name);
  }
  const auto value = to_int(text);
  if (!value) {
    throw std::runtime_error(std::string(name) + "=\"" + text + "\" is not a whole number");
  }
  return *value;
}

// Slurm's task count on node `node`: from SLURM_STEP_TASKS_PER_NODE (the step's), else
// SLURM_TASKS_PER_NODE (the job's).
int slurm_local_size(const GetEnv& get, int node) {
  const char* name = "SLURM_STEP_TASKS_PER_NODE";
  const char* text = get(name);
  if (text == nullptr || *text == '\0') {
    name = "SLURM_TASKS_PER_NODE";
    text = get(name);
  }
  if (text == nullptr) {
    throw std::runtime_error(
        "the slurm launcher set a local rank but neither SLURM_STEP_TASKS_PER_NODE nor "
        "SLURM_TASKS_PER_NODE");
  }
  const auto count = slurm_tasks_on_node(text, node);
  if (!count) {
    throw std::runtime_error(std::string(name) + "=\"" + text + "\" gives no task count for node " +
                             std::to_string(node) + " (SLURM_NODEID)");
  }
  return *count;
}

// "NAME=value" as the launcher set it.
std::string variable_text(const GetEnv& get, const char* name) {
  const char* value = get(name);
  return std::string(name) + "=" + (value != nullptr ? value : "(unset)");
}

// A layout that cannot be, with the variables it was read from and their values.
std::string layout_error(const GetEnv& get, const LauncherVariables& l, const RankEnv& e,
                         std::optional<int> node) {
  std::string local_size;
  if (l.local_size != nullptr) {
    local_size = variable_text(get, l.local_size);
  } else {  // Slurm: the task count of this node
    const char* step = get("SLURM_STEP_TASKS_PER_NODE");
    local_size = variable_text(get, step != nullptr && *step != '\0'
                                        ? "SLURM_STEP_TASKS_PER_NODE"
                                        : "SLURM_TASKS_PER_NODE") +
                 " on node " + std::to_string(node.value_or(-1));
  }
  return "inconsistent layout from " + e.source + ": rank " + std::to_string(e.rank) + " of " +
         std::to_string(e.world_size) + " (" + variable_text(get, l.rank) + ", " +
         variable_text(get, l.size) + "), local rank " + std::to_string(e.local_rank) + " of " +
         std::to_string(e.local_size) + " (" + variable_text(get, l.local_rank) + ", " +
         local_size + ")";
}

}  // namespace

RankEnv read_rank_env(const GetEnv& get) {
  RankEnv e;
  const LauncherVariables* found = nullptr;
  for (const LauncherVariables& l : kLaunchers) {
    if (get(l.local_rank) != nullptr) {
      found = &l;
      break;
    }
  }
  if (found == nullptr) {
    for (const char* name : kForeignRankVariables) {
      if (get(name) != nullptr) {
        throw std::runtime_error(
            std::string(name) + " is set, but not the local rank of a launcher synkrun reads "
            "(OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID, PMI_LOCAL_RANK): "
            "every rank would take the first GPU and the same cores");
      }
    }
    e.source = "none";  // a single process started by hand
    return e;
  }
  e.source = found->source;
  e.local_rank = required_number(get, found->local_rank, e.source);
  e.rank = required_number(get, found->rank, e.source);
  e.world_size = required_number(get, found->size, e.source);
  std::optional<int> node;
  if (found->local_size != nullptr) {
    e.local_size = required_number(get, found->local_size, e.source);
  } else {
    node = required_number(get, "SLURM_NODEID", e.source);
    e.local_size = slurm_local_size(get, *node);
  }
  if (e.local_rank < 0 || e.local_rank >= e.local_size || e.rank < 0 || e.rank >= e.world_size ||
      e.local_size > e.world_size || (node && *node < 0)) {
    throw std::runtime_error(layout_error(get, *found, e, node));
  }
  // Slurm numbers its nodes. mpirun does not: under its default by-slot mapping (synkrun's) a
  // node's ranks are consecutive, so this is exact when every node runs as many ranks as this
  // one; under --map-by node it is not.
  e.node_rank = node ? *node : (e.rank - e.local_rank) / e.local_size;
  return e;
}

namespace {

// SYNK_NODE_RANK under mpirun with hosts: where synkrun knew every host's slots, the node that
// mpirun's by-slot mapping gives this rank (exact for nodes of different sizes too); else
// read_rank_env's, exact when every node runs as many ranks.
void number_node(const Options& o, RankEnv& env) {
  if (env.source != "openmpi" || o.node_slots.empty()) return;
  std::vector<HostSlots> ordered;
  if (!parse_host_list(o.node_slots, ordered).empty()) return;
  const auto node = node_of_rank(ordered, env.rank, env.world_size, env.local_size);
  if (node) env.node_rank = *node;
}

// Whether mpirun bound this rank itself (its default binding, or --bind-to): the plan replaces
// that binding, made without regard to GPUs. CPUs a rank inherited unbound (taskset on mpirun,
// a cpuset) are the user's, and the plan keeps to them, as synkrun's own launch does. mpirun
// binds a rank to fewer CPUs than its parent (mpirun, or its daemon) may use, in every version.
bool bound_by_mpirun(const RankEnv& env) {
  if (env.source != "openmpi") return true;
  cpu_set_t mine, parents;
  if (sched_getaffinity(0, sizeof mine, &mine) != 0 ||
      sched_getaffinity(getppid(), sizeof parents, &parents) != 0) {
    return true;
  }
  cpu_set_t both;
  CPU_AND(&both, &mine, &parents);
  return CPU_EQUAL(&both, &mine) && !CPU_EQUAL(&mine, &parents);  // a strict subset
}

// The machine this rank plans on: the XML given with --topology, else the launcher's export of
// this host (it spares the PCI scan), else this machine discovered afresh.
TopologySource rank_topology_source(const Options& o, const RankEnv& env) {
  if (!o.topology.empty()) return {TopologySource::Kind::xml_file, o.topology, false};
  const auto eq = o.node_topology.find('=');
  if (eq != std::string::npos && o.node_topology.substr(0, eq) == TopologyExport::machine() &&
      TopologyExport::is_export(o.node_topology.substr(eq + 1))) {
    return {TopologySource::Kind::xml_file, o.node_topology.substr(eq + 1), true};
  }
  // Started by synkrun on its one host (mpirun --bind-to none), the rank has synkrun's CPUs,
  // which its plan kept to (taskset -c 1 synkrun ...): so does this one.
  TopologySource fresh;
  fresh.within_binding = o.plan_shown || !bound_by_mpirun(env);
  return fresh;
}

// Whether the launcher bound this rank to fewer CPUs than the node offers (srun --cpu-bind,
// taskset): all the PUs of the node's cores against the rank's affinity.
bool bound_narrower(const NodeTopology& topo, const std::vector<unsigned>& affinity) {
  std::size_t pus = 0;
  for (const Core& c : topo.cores) pus += c.pus.size();
  return !affinity.empty() && affinity.size() < pus;
}

// Where this rank runs: its share of the node's plan, and the node.
struct Placement {
  RankPlan me;
  NodeTopology topo;
  bool launcher_bound = false;  // srun's binding kept (the plan's CPUs not used)
};

// Plans the node as every rank of it does, and binds this rank to its CPUs (and NUMA node).
// Throws PlanError (the same on every rank of the node) or another error.
Placement plan_and_bind(const Options& o, const RankEnv& env, const std::string& who) {
  Placement out;
  Hwloc hw(rank_topology_source(o, env));
  NodeTopology& topo = out.topo = hw.extract();
  // The rule of synkrun's own launch: the ranks' GPUs replace an inherited list. Each rank
  // says it, as srun may give each task a list of its own.
  const std::string visible =
      inherited_visible_devices_error(std::getenv("CUDA_VISIBLE_DEVICES"), topo, o.plan);
  if (!visible.empty()) throw std::runtime_error(visible);
  const Plan plan = make_plan(topo, env.local_size, o.plan);
  // srun binds each task by its own rules (--cpu-bind) within the job's CPUs, which the
  // node's topology does not show: its binding stands, and the plan gives the GPUs only.
  const bool srun_bound =
      env.source == "slurm" && o.topology.empty() && bound_narrower(topo, current_affinity());
  // Unless the launching synkrun showed this node's plan before the start (one host), nobody
  // saw it: its notes, ranks left without a GPU among them, come here.
  if (!o.plan_shown && env.local_rank == 0) {
    for (const std::string& note : plan.notes) {
      if (srun_bound && note.find("GPU") == std::string::npos) continue;  // of cores unused
      std::fprintf(stderr, "%s: note: %s\n", who.c_str(), note.c_str());
    }
  }
  RankPlan& me = out.me = plan.ranks[static_cast<std::size_t>(env.local_rank)];
  if (me.cpus.empty()) return out;
  if (srun_bound) {
    me.cpus.clear();
    me.numa.reset();
    me.shared = false;
    out.launcher_bound = true;
    return out;
  }
  const std::optional<unsigned> numa = topo.numas.size() > 1 ? me.numa : std::nullopt;
  // This machine, discovered or exported by the launcher: bind through it; a machine read from
  // --topology is not this one, whose own topology binds.
  const std::string warning = o.topology.empty()
                                  ? hw.bind_process(me.cpus, numa)
                                  : Hwloc(TopologySource{}).bind_process(me.cpus, numa);
  if (!warning.empty() && o.report_bindings) {
    std::fprintf(stderr, "%s: note: %s\n", who.c_str(), warning.c_str());
  }
  return out;
}

// SYNK_RANK and the rest of the contract (README), CUDA's device order and visible devices
// (the SYNK_ ones are kRankStepVariables).
void export_rank_env(const RankEnv& env, const RankPlan& me, const NodeTopology& topo,
                     const std::string& cpus) {
  auto set = [](const char* name, const std::string& value) { setenv(name, value.c_str(), 1); };
  set("SYNK_RANK", std::to_string(env.rank));
  set("SYNK_WORLD_SIZE", std::to_string(env.world_size));
  set("SYNK_LOCAL_RANK", std::to_string(env.local_rank));
  set("SYNK_LOCAL_SIZE", std::to_string(env.local_size));
  set("SYNK_NODE_RANK", std::to_string(env.node_rank));
  set("SYNK_GPU", join(me.gpus));
  set("SYNK_CPUS", cpus);
  set("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  // On a node without GPUs CUDA_VISIBLE_DEVICES is left alone; on a GPU node a rank without a
  // GPU gets an empty list, so it cannot take another rank's GPU by default.
  if (!topo.gpus.empty()) set("CUDA_VISIBLE_DEVICES", join(me.gpus));
}

// --report-bindings: one line a rank.
void report_binding(const RankEnv& env, const Placement& place, const std::string& cpus) {
  const RankPlan& me = place.me;
  const NodeTopology& topo = place.topo;
  std::string gpu = "-";
  if (!me.gpus.empty()) {
    gpu.clear();
    for (int g : me.gpus) {
      if (!gpu.empty()) gpu += ',';
      gpu += std::to_string(g);
      gpu += " (" + topo.gpus[static_cast<std::size_t>(g)].pci + ")";
    }
  }
  const std::string numa = me.numa ? std::to_string(*me.numa) : "-";
  std::fprintf(stderr, "synkrun: host %s rank %d local rank %d: gpu %s, cpus %s, numa %s%s\n",
               host_name().c_str(), env.rank, env.local_rank, gpu.c_str(),
               cpus.empty() ? "?" : cpus.c_str(), numa.c_str(),
               place.launcher_bound ? " (srun's binding)"
               : me.shared          ? " (cores shared with other ranks)"
                                    : "");
}

}  // namespace

int run_rank_step(const Options& o) {
  RankEnv env;
  try {
    env = read_rank_env([](const char* n) { return std::getenv(n); });
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "synkrun: rank step: %s\n", ex.what());
    return 2;
  }
  number_node(o, env);
  const std::string who = "synkrun: rank " + std::to_string(env.rank) + " on " + host_name();
  if (o.program.empty()) {
    std::fprintf(stderr, "%s: missing PROGRAM\n", who.c_str());
    return 2;
  }
  Placement place;
  try {
    place = plan_and_bind(o, env, who);
  } catch (const PlanError& ex) {
    // Every rank of the node makes the same plan: one line for the node, not one per rank.
    if (env.local_rank == 0) std::fprintf(stderr, "%s: %s\n", who.c_str(), ex.what());
    return 2;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "%s: %s\n", who.c_str(), ex.what());
    return 2;
  }
  const std::string cpus = format_list(current_affinity());
  export_rank_env(env, place.me, place.topo, cpus);
  if (o.report_bindings) report_binding(env, place, cpus);

  // Open MPI puts each rank in a process group of its own, so a signal to mpirun's group does
  // not reach it, and a rank whose mpirun (or orted) was killed lived on as an orphan. The
  // kernel kills it with its parent instead (the setting survives the exec below).
  const pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() != parent) return 1;  // already gone

  std::vector<char*> argv;
  for (const std::string& a : o.program) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  const int err = errno;
  std::fprintf(stderr, "%s: cannot run %s: %s\n", who.c_str(), argv[0], std::strerror(err));
  return err == ENOENT ? 127 : 126;
}

}  // namespace synk::launch
