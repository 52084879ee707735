// synkrun: plan the node, then run mpirun with synkrun's rank step on every rank
// (or, with --rank-step, be that step). Usage errors exit 2 with one line on stderr.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <climits>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "allocation.h"
#include "backends/shm/stale_segments.h"
#include "job.h"
#include "job_shm_dir.h"
#include "mpirun_command.h"
#include "options.h"
#include "rank_step.h"
#include "topology.h"
#include "topology_export.h"
#include "topology_plan.h"

#ifndef SYNK_MPIRUN_PATH
#define SYNK_MPIRUN_PATH "mpirun"
#endif

namespace {

using namespace synk::launch;

int usage_error(const std::string& message) {
  std::fprintf(stderr, "synkrun: error: %s\n", message.c_str());
  return 2;
}

std::string self_path(const char* argv0) {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

std::string on_path(const std::string& name) { return find_on_path(std::getenv("PATH"), name); }

// mpirun on PATH first (the user's choice), else the one found at build time.
std::string find_mpirun() {
  const std::string found = on_path("mpirun");
  return found.empty() ? SYNK_MPIRUN_PATH : found;
}

// Finds PROGRAM as mpirun does: a name with a slash as it is; without one on PATH, then in the
// current directory (which execvp on the ranks would not look in: that one is passed on as an
// absolute path). Returns "" or why it cannot run here, with the exit code the shell would give
// (program is changed only on success).
std::string resolve_program(std::string& program, int& code) {
  std::string path = program;
  if (program.find('/') == std::string::npos) {
    path = on_path(program);
    if (path.empty()) {
      std::error_code ec;  // the current directory may have been removed
      path = std::filesystem::absolute(program, ec).string();
      if (ec || access(path.c_str(), F_OK) != 0) {
        code = 127;
        return "cannot run " + program + ": not found on PATH or in the current directory";
      }
    } else {
      return "";  // found on PATH: the ranks find it there too
    }
  }
  std::error_code ec;
  if (access(path.c_str(), F_OK) != 0) {
    code = 127;
    return "cannot run " + program + ": " + std::strerror(errno);
  }
  if (std::filesystem::is_directory(path, ec)) {
    code = 126;
    return "cannot run " + program + ": it is a directory";
  }
  if (access(path.c_str(), X_OK) != 0) {
    code = 126;
    return "cannot run " + program + ": " + std::strerror(errno);
  }
  program = path;
  return "";
}

// The ranks-per-core guard (kMaxRanksPerCore) for this host, before mpirun starts anything: its
// ranks come from -np alone or, with hosts, from the slots of the entries that name this host
// (other hosts' rank steps guard themselves). Also reads, and so checks, the hostfile.
std::string ranks_per_core_error(const Options& o, const NodeTopology& topo, int nranks) {
  const long long cores = static_cast<long long>(topo.cores.size());
  const bool with_hosts = !o.hosts.empty() || !o.hostfile.empty();
  long long here = nranks;
  std::string how = "-np " + std::to_string(nranks);
  if (with_hosts) {
    std::vector<HostSlots> hosts;
    if (std::string err = read_job_hosts(o, cores, hosts); !err.empty()) return err;
    const std::optional<long long> np = o.np ? std::optional<long long>(*o.np) : std::nullopt;
    here = ranks_on_this_host(hosts, np, is_this_host);
    how = (o.hosts.empty() ? "hostfile " + o.hostfile : "-H " + o.hosts) + " puts " +
          std::to_string(here) + " ranks on this host";
  }
  if (here <= kMaxRanksPerCore * cores) return "";
  return how + ": more than " + std::to_string(kMaxRanksPerCore) +
         " ranks per core on a node of " + std::to_string(cores) + " cores; " +
         (with_hosts ? "spread them over more hosts"
                     : "give the hosts with -H or --hostfile to spread them");
}

// The machine to plan for: the XML given with --topology, else this one (which ranks on this
// host then load from an export instead of discovering it again). "" or a usage error.
std::string discover_topology(Options& o, NodeTopology& topo, TopologyExport& exported) {
  std::unique_ptr<Hwloc> hw;
  try {
    TopologySource src;
    src.within_binding = true;  // taskset -c 1 synkrun ...: the ranks stay on CPU 1
    if (!o.topology.empty()) src = {TopologySource::Kind::xml_file, o.topology, false};
    hw = std::make_unique<Hwloc>(src);
    topo = hw->extract();
  } catch (const std::exception& e) {
    return e.what();
  }
  if (o.topology.empty() && !o.dry_run) {
    try {
      exported = TopologyExport::create(hw->xml());
      o.node_topology = TopologyExport::machine() + "=" + exported.path();
    } catch (const std::exception&) {
      // Not fatal: every rank then discovers the machine itself.
    }
  }
  if (o.topology.empty()) {  // this machine: what its environment already restricts counts
    return inherited_visible_devices_error(std::getenv("CUDA_VISIBLE_DEVICES"), topo, o.plan);
  }
  return "";
}

// Whether PROGRAM can run as mpirun will start it; the exit code to stop with if not.
std::optional<int> check_program(Options& o, bool multi_node) {
  for (std::size_t i = 1; i < o.program.size(); ++i) {
    // mpirun reads any ":" word of its command line, PROGRAM's arguments included, as the start
    // of another program (MPMD): the job would run something else.
    if (o.program[i] == ":") {
      return usage_error("PROGRAM's argument " + std::to_string(i) +
                         " is \":\", which mpirun would read as the start of another program; "
                         "synkrun cannot pass it");
    }
  }
  if (o.program.empty()) return std::nullopt;
  int code = 0;
  const std::string err = resolve_program(o.program[0], code);
  if (err.empty()) return std::nullopt;
  if (o.dry_run || multi_node) {
    // Planning for elsewhere, or the other hosts may have it: say so, start anyway.
    std::fprintf(stderr, "synkrun: note: %s here\n", err.c_str());
    return std::nullopt;
  }
  std::fprintf(stderr, "synkrun: error: %s\n", err.c_str());
  return code;
}

// This node's share of the job: how many ranks and where each goes.
struct NodePlan {
  bool multi_node = false;
  Allocation allocation;  // a resource manager's, where it gives the job its nodes (no -H)
  // Across hosts without -np, mpirun starts a rank per slot (-H host:slots, the hostfile's
  // slots), and each node plans for the ranks it gets (nranks 0: no -np for mpirun).
  bool rank_per_slot = false;
  int nranks = 0;
  Plan plan;
  bool planned = false;
};

// Fills node (all but multi_node, which the caller sets): "" or a usage error. With several
// hosts (and so -np) a plan this node cannot make is left to each node, which may run fewer
// ranks.
std::string plan_node(const Options& o, const NodeTopology& topo, NodePlan& node) {
  node.rank_per_slot = node.multi_node && !o.np;
  // Across an allocation's nodes this one's share is unknown here: each rank step guards its own.
  const auto guard = [&](int nranks) {
    return node.allocation.nodes > 1 ? std::string() : ranks_per_core_error(o, topo, nranks);
  };
  if (node.rank_per_slot) return guard(0);
  try {
    node.nranks = o.np ? *o.np : default_rank_count(topo, o.plan);
    if (std::string err = guard(node.nranks); !err.empty()) return err;
    node.plan = make_plan(topo, node.nranks, o.plan);
    node.planned = true;
  } catch (const PlanError& e) {
    if (!node.multi_node) return e.what();
  }
  return "";
}

// What synkrun says about the plan besides its table.
std::vector<std::string> plan_notes(const Options& o, const NodeTopology& topo,
                                    const NodePlan& node, const MpirunContext& ctx) {
  // Across hosts this plan puts every rank on this node: when the job starts, each node's rank
  // step prints the notes of its own share instead.
  std::vector<std::string> notes =
      node.multi_node && !o.dry_run ? std::vector<std::string>{} : node.plan.notes;
  if (ctx.oversubscribe) {
    const std::size_t cores = topo.cores.size();
    notes.insert(notes.begin(), std::to_string(node.nranks) + " ranks on " +
                                    std::to_string(cores) + (cores == 1 ? " core" : " cores") +
                                    ": oversubscribing (mpirun --oversubscribe)");
  }
  if (node.allocation.nodes > 1) {
    notes.push_back("a " + node.allocation.manager + " allocation of " +
                    std::to_string(node.allocation.nodes) +
                    " nodes: mpirun spreads the ranks over them");
  }
  if (node.rank_per_slot) {
    notes.push_back("no -np across hosts: one rank per slot of the hosts (mpirun's rule); "
                    "give each host as many slots as it has GPUs");
  }
  if (node.multi_node && !node.planned) notes.push_back("this node's plan is made on each node");
  std::vector<HostSlots> ordered;  // the job's hosts in mapping order, where their slots are known
  if (node.multi_node && o.dry_run && !o.node_slots.empty() &&
      parse_host_list(o.node_slots, ordered).empty()) {
    // node_slots is set only where every host's slots are known; no -np: a rank per slot.
    const long long world = node.nranks != 0 ? node.nranks : total_slots(ordered).value_or(0);
    notes.push_back("mpirun fills the hosts' slots in order: " + ranks_by_host(ordered, world));
  }
  if (node.multi_node && node.planned && o.dry_run) {
    notes.push_back("with several hosts each node plans for its own ranks when the job starts; "
                    "shown: all " + std::to_string(node.nranks) + " on this node");
  }
  return notes;
}

int print_dry_run(const Options& o, const NodeTopology& topo, const NodePlan& node,
                  const std::vector<std::string>& notes, const std::vector<std::string>& cmd) {
  if (o.json) {
    std::printf("%s\n", plan_to_json(node.plan, topo).c_str());
    for (const auto& n : notes) std::fprintf(stderr, "synkrun: note: %s\n", n.c_str());
    std::fprintf(stderr, "synkrun: mpirun command: %s\n", shell_join(cmd).c_str());
    return 0;
  }
  if (node.planned) std::printf("%s", plan_to_text(node.plan, topo).c_str());  // with plan.notes
  for (const auto& n : notes) {
    if (std::find(node.plan.notes.begin(), node.plan.notes.end(), n) == node.plan.notes.end()) {
      std::printf("note: %s\n", n.c_str());
    }
  }
  std::printf("mpirun command:\n  %s\n", shell_join(cmd).c_str());
  return 0;
}

// mpirun could not start, or lost, a daemon on some host: one line on what to check, naming
// the hosts that do not resolve here and the connection Open MPI reported failing.
void report_daemon_failure(const Options& o, const FailureParser& failure, int exit_code) {
  std::vector<HostSlots> hosts;
  if (!read_job_hosts(o, 1, hosts).empty()) hosts.clear();
  std::string unknown;
  for (const HostSlots& h : hosts) {
    if (!resolves(h.name)) unknown += (unknown.empty() ? "" : ", ") + h.name;
  }
  std::string found;
  if (!unknown.empty()) found += "; no address here for " + unknown;
  if (!failure.lost_daemon_host().empty()) {
    found += "; it lost the one on " + failure.lost_daemon_host();
  }
  if (!failure.connection_failure().empty()) found += "; " + failure.connection_failure();
  std::fprintf(stderr,
               "synkrun: error: mpirun could not start or lost its daemon on a host%s. Check the "
               "host names, that the hosts reach each other on the network Open MPI uses "
               "(OMPI_MCA_oob_tcp_if_include), and that Open MPI and the program are at the same "
               "paths there; exit code %d\n",
               found.c_str(), exit_code);
}

// The job's hosts in mapping order and its ranks, as synkrun mapped them (--node-slots); false
// where it did not (one host, or a host's slots unknown).
bool mapped_hosts(const Options& o, std::vector<HostSlots>& ordered, long long& world) {
  if (o.node_slots.empty() || !parse_host_list(o.node_slots, ordered).empty()) return false;
  world = o.np ? *o.np : total_slots(ordered).value_or(0);
  return true;
}

// The host that holds `rank` as synkrun mapped the job's ranks, or "" where it did not.
std::string mapped_host(const Options& o, std::optional<int> rank) {
  std::vector<HostSlots> ordered;
  long long world = 0;
  if (!rank || !mapped_hosts(o, ordered, world)) return "";
  return host_of_rank(ordered, *rank, world);
}

// "; rank 2 (on hostB) had not reached the call that timed out": where a rank's synk Timeout
// named the rank it waited for, which is not the rank that failed first (the first to give up);
// where the watchdog ended the rank that failed first, a word that it only waited.
std::string waited_text(const Options& o, const FailureParser& failure) {
  const std::optional<int> late = failure.waited_for();
  if (!late && failure.watchdog_ended() && failure.exit_code() == 124) {
    return " (synk's watchdog ended it: it waited inside MPI for a rank that had not reached "
           "its call; see its synk Timeout line)";
  }
  if (!late || late == failure.rank()) return "";
  const std::string host = mapped_host(o, late);
  return "; rank " + std::to_string(*late) + (host.empty() ? "" : " (on " + host + ")") +
         " had not reached the call that timed out";
}

// A rank ended by SIGPIPE only wrote to what had closed: mpirun may name it first although a
// rank, daemon or host that went before it is the cause (a host's daemon killed, seen so).
void print_broken_pipe_note() {
  std::fprintf(stderr,
               "synkrun: note: a broken pipe: what the rank wrote to (a connection to another "
               "rank, or mpirun's output) had closed; look for a rank, daemon or host that "
               "went away before it\n");
}

// Where mpirun hung on after a failure (it waits for a host it cannot reach) and ranks gave up
// waiting (synk Timeouts): the hosts none of whose ranks said a word, which is how a host that
// is stopped, or cut off from this one, looks (its ranks' output does not come through).
void print_unheard_hosts(const Options& o, const FailureParser& failure) {
  std::vector<HostSlots> ordered;
  long long world = 0;
  if (failure.timed_out_ranks().empty() || !mapped_hosts(o, ordered, world)) return;
  const std::string unheard = unheard_hosts(ordered, world, failure.timed_out_ranks());
  if (unheard.empty()) return;
  std::fprintf(stderr,
               "synkrun: note: ranks gave up waiting (synk Timeout), and no rank on %s said "
               "why: a host that is stopped, or cut off from this one, looks so\n",
               unheard.c_str());
}

// The job's directory for Open MPI's shared memory, after removing those of killed jobs.
JobShmDir make_job_shm_dir() {
  for (const std::string& name : remove_stale_job_dirs()) {
    std::fprintf(stderr, "synkrun: removed /dev/shm/%s, left by a job that was killed\n",
                 name.c_str());
  }
  return JobShmDir::create();
}

// Runs the job and says how it ended; returns synkrun's exit code. shm_dir goes as soon as the
// job has ended, before synkrun writes to a stderr that may be closed (SIGPIPE).
int run_and_report(const Options& o, const std::vector<std::string>& cmd, double timeout_s,
                   JobShmDir& shm_dir) {
  JobResult r;
  try {
    r = run_job(cmd, timeout_s);
  } catch (const std::exception& e) {
    shm_dir = JobShmDir();
    std::fprintf(stderr, "synkrun: error: %s\n", e.what());
    return 1;
  }
  shm_dir = JobShmDir();
  // A rank killed while it created a named segment leaves its name; this host's go now.
  for (const std::string& name : synk::shm::remove_stale_segments()) {
    std::fprintf(stderr, "synkrun: removed /dev/shm/%s, left by a rank that died making it\n",
                 name.c_str());
  }
  if (r.timed_out) {
    std::fprintf(stderr, "synkrun: the job ran out of time (--timeout %g); exit code 124\n",
                 timeout_s);
  } else if (r.forwarded_signal) {
    // The shell convention for a job ended by a signal, whatever mpirun made of it.
    r.exit_code = 128 + *r.forwarded_signal;
    std::fprintf(stderr, "synkrun: stopped by signal %d; exit code %d\n", *r.forwarded_signal,
                 r.exit_code);
  } else if (r.exit_code != 0 && r.failure.daemons_failed() && !r.failure.rank()) {
    report_daemon_failure(o, r.failure, r.exit_code);
  } else if (r.exit_code != 0 && r.failure.slots_short() && !r.failure.rank()) {
    std::fprintf(stderr,
                 "synkrun: error: mpirun found fewer slots than ranks (a hostfile line without "
                 "slots=N counts the host's cores): give each host's slots (slots=N, -H host:N) "
                 "or fewer ranks; exit code %d\n",
                 r.exit_code);
  } else if (r.exit_code != 0) {
    const std::string who = r.failure.describe(mapped_host(o, r.failure.rank()));
    if (who.empty() && r.mpirun_signal) {
      // Not a stop synkrun made, so someone else's (the OOM killer, kill -9): say so.
      const char* name = strsignal(*r.mpirun_signal);
      std::fprintf(stderr,
                   "synkrun: mpirun itself was ended by signal %d (%s), not by synkrun; its "
                   "ranks end with it; exit code %d\n",
                   *r.mpirun_signal, name != nullptr ? name : "?", r.exit_code);
    } else if (who.empty()) {
      // mpirun named no rank (it hung on, waiting for a host): a Timeout may still say who.
      std::fprintf(stderr, "synkrun: the job failed with exit code %d%s\n", r.exit_code,
                   waited_text(o, r.failure).c_str());
    } else {
      std::fprintf(stderr, "synkrun: %s failed first%s; exit code %d\n", who.c_str(),
                   waited_text(o, r.failure).c_str(), r.exit_code);
      if (r.failure.signal() == SIGPIPE) print_broken_pipe_note();
    }
    if (r.stopped_after_failure) print_unheard_hosts(o, r.failure);
  }
  return r.exit_code;
}

// The files Open MPI reads its MCA parameters from, the one that wins first: the user's, then
// its installation's (Debian puts it in /etc/openmpi; a build of its own, beside its bin/).
std::vector<std::string> mca_parameter_files(const std::string& mpirun) {
  std::vector<std::string> files;
  if (const char* home = std::getenv("HOME")) {
    files.push_back(std::string(home) + "/.openmpi/mca-params.conf");
  }
  files.push_back("/etc/openmpi/openmpi-mca-params.conf");
  std::error_code ec;  // (a relative PATH entry: from the current directory)
  const std::filesystem::path prefix =
      std::filesystem::absolute(mpirun, ec).parent_path().parent_path();
  files.push_back((prefix / "etc" / "openmpi-mca-params.conf").string());
  return files;
}

// Why mpirun cannot reach the job's hosts, or "": Open MPI is told to start ranks on this node
// only (isolated_launcher) and a host is another. mpirun's own words for it, "All nodes which
// are allocated for this job are already filled", do not say why.
std::string isolated_error(const std::vector<HostSlots>& hosts,
                           const std::vector<std::string>& mca_files) {
  const auto other = std::find_if(hosts.begin(), hosts.end(),
                                  [](const HostSlots& h) { return !is_this_host(h.name); });
  if (other == hosts.end()) return "";
  const std::string where = isolated_launcher(std::getenv, mca_files);
  if (where.empty()) return "";
  return where + " has Open MPI start ranks on this node only, and " + other->name +
         " is another host: unset it (or set plm to rsh) to reach other hosts";
}

// Why the job cannot run where it needs more ranks than this node has cores and the user's
// Open MPI setting forbids that (mpirun would refuse synkrun's --oversubscribe); "" where it can.
std::string oversubscribe_error(const NodeTopology& topo, const MpirunContext& ctx,
                                const std::vector<std::string>& mca_files) {
  if (!ctx.oversubscribe) return "";
  const std::string refused = oversubscription_refused(std::getenv, mca_files);
  if (refused.empty()) return "";
  const std::string cores = std::to_string(topo.cores.size());
  return std::to_string(ctx.nranks) + " ranks on " + cores + " cores need mpirun's "
         "--oversubscribe, which " + refused + " forbids: unset it, or run at most " + cores +
         " ranks here";
}

// The job's hosts in mpirun's mapping order as "host:slots,...", for the rank steps to number
// the nodes (SYNK_NODE_RANK); "" where a host's slots are unknown.
std::string node_slots_text(const std::vector<HostSlots>& hosts) {
  return total_slots(hosts) ? host_list_text(mapping_order(hosts, is_this_host)) : "";
}

// synkrun's main path: discover the machine, plan this node, build the mpirun command, then
// print it (dry run) or run it and report.
int launch(Options& o, const char* argv0) {
  if (const std::string err = check_files(o); !err.empty()) return usage_error(err);
  // The hosts with their slots where known; a bad hostfile line leaves them unread here, and
  // the ranks-per-core check says why.
  std::vector<HostSlots> hosts;
  const bool hosts_read = read_job_hosts(o, 0, hosts).empty();
  if (const std::string err = hosts_read ? hostfile_error(o, hosts) : ""; !err.empty()) {
    return usage_error(err);
  }
  if (!o.topology.empty()) o.topology = std::filesystem::absolute(o.topology).string();
  NodeTopology topo;
  TopologyExport exported;  // lives until the job ends: the ranks on this host read it
  if (const std::string err = discover_topology(o, topo, exported); !err.empty()) {
    return usage_error(err);
  }
  NodePlan node;
  const bool with_hosts = !o.hosts.empty() || !o.hostfile.empty();
  // Inside an allocation of several nodes (salloc -N 2), mpirun spreads the ranks itself.
  if (!with_hosts) node.allocation = find_allocation(std::getenv);
  node.multi_node = with_hosts || node.allocation.nodes > 1;
  // Hosts that are all this one (-H localhost:2) cannot have a PROGRAM this one lacks.
  const bool only_here = with_hosts && hosts_read && !hosts.empty() &&
                         std::all_of(hosts.begin(), hosts.end(),
                                     [](const HostSlots& h) { return is_this_host(h.name); });
  if (const auto code = check_program(o, node.multi_node && !only_here)) return *code;
  if (node.multi_node && hosts_read) o.node_slots = node_slots_text(hosts);
  if (const std::string err = plan_node(o, topo, node); !err.empty()) return usage_error(err);

  MpirunContext ctx;
  ctx.mpirun = find_mpirun();
  ctx.self = self_path(argv0);
  ctx.nranks = node.nranks;
  ctx.as_root = geteuid() == 0;
  ctx.oversubscribe = !node.multi_node && node.nranks > static_cast<int>(topo.cores.size());
  ctx.synk_env = synk_variables(environ);
  const std::vector<std::string> mca_files = mca_parameter_files(ctx.mpirun);
  ctx.ssh_defaults = with_hosts && default_ssh_agent(std::getenv, mca_files);
  const std::string no_abort = abort_turned_off(std::getenv, mca_files);
  ctx.restore_abort = !no_abort.empty();
  JobShmDir shm_dir;  // lives until the job ends
  if (!node.multi_node && !o.dry_run && !user_sets_shm_dir(std::getenv, mca_files)) {
    shm_dir = make_job_shm_dir();
    ctx.shm_dir = shm_dir.path();
  }
  const std::vector<std::string> cmd = mpirun_command(o, ctx);
  std::vector<std::string> notes = plan_notes(o, topo, node, ctx);
  if (ctx.restore_abort) {
    notes.push_back(no_abort + " would let a failed job end with exit code 0: synkrun passes "
                    "orte_abort_on_non_zero_status 1, so that a failing rank ends the job");
  }
  for (const std::string& err :
       {isolated_error(hosts, mca_files), oversubscribe_error(topo, ctx, mca_files)}) {
    if (err.empty()) continue;
    if (!o.dry_run) return usage_error(err);
    notes.push_back("the job would fail: " + err);
  }

  if (o.dry_run) return print_dry_run(o, topo, node, notes, cmd);
  for (const auto& n : notes) std::fprintf(stderr, "synkrun: note: %s\n", n.c_str());
  return run_and_report(o, cmd, o.timeout_s, shm_dir);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  ParseResult parsed = parse_options(args);
  switch (parsed.status) {
    case ParseResult::Status::help:
      std::printf("%s", parsed.text.c_str());
      return 0;
    case ParseResult::Status::error:
      return usage_error(parsed.text);
    case ParseResult::Status::ok:
      break;
  }
  if (parsed.options.rank_step) return run_rank_step(parsed.options);
  try {
    return launch(parsed.options, argv[0]);
  } catch (const std::exception& e) {  // one no step foresaw: a line, not std::terminate's abort
    std::fprintf(stderr, "synkrun: error: %s\n", e.what());
    return 1;
  }
}
