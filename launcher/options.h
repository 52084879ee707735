// synkrun's command line: `synkrun [options] [--] PROGRAM [ARGS...]`, parsed with CLI11.
// Parsing stops at PROGRAM, so the program's own flags pass through untouched.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hosts.h"
#include "topology_plan.h"

namespace synk::launch {

struct Options {
  std::optional<int> np;  // -np / -n; unset: one rank per GPU
  std::string hosts;      // -H host:slots,... (for mpirun)
  std::string hostfile;   // --hostfile FILE (for mpirun)
  PlanOptions plan;       // --bind, --gpus, --gpus-per-rank
  bool report_bindings = false;
  bool dry_run = false;
  bool json = false;
  std::string topology;              // --topology FILE.xml; empty: this machine
  std::vector<std::string> exports;  // -x VAR[=VALUE], in order
  double timeout_s = 0;              // --timeout; 0: none
  bool rank_step = false;            // internal: run as the rank step on each rank
  std::string node_topology;         // internal: "MACHINE=FILE.xml", the launcher's topology
                                     // as the launching synkrun saw it, for ranks on HOST
  std::string node_slots;            // internal: "host:slots,..." in mpirun's mapping order,
                                     // for each rank's SYNK_NODE_RANK (hosts.h)
  bool plan_shown = false;           // internal: the launching synkrun showed this node's
                                     // plan notes, so its rank steps do not
  std::vector<std::string> program;  // PROGRAM and its arguments
};

struct ParseResult {
  enum class Status { ok, help, error };
  Status status = Status::ok;
  Options options;
  std::string text;  // the help text, or the one-line error message (without "synkrun: ")
};

// Parses argv[1..]. Pure: touches no file (see check_files).
ParseResult parse_options(const std::vector<std::string>& args);

// Checks that the hostfile and the topology file are files that can be read; returns the
// error or "".
std::string check_files(const Options& options);

// The hostfile's hosts, each without slots= given `default_slots`; returns the error (a bad
// line or host name) or "".
std::string read_hostfile(const Options& options, long long default_slots,
                          std::vector<HostSlots>& out);

// The job's hosts: -H's list (a host without :SLOTS has 1), even beside a hostfile, as
// Open MPI 4.1's mpirun takes them; else the hostfile's. "" or the error.
std::string read_job_hosts(const Options& options, long long default_slots,
                           std::vector<HostSlots>& out);

// What mpirun would refuse of the job's hosts (read_job_hosts's, unknown slots 0) in a page that
// names synkrun as the program: a hostfile, without -H, that names no host, or an -np beyond
// the slots of a hostfile that gives every host's. (-np beyond -H's slots is refused when the
// options are parsed.) "" or the error.
std::string hostfile_error(const Options& options, const std::vector<HostSlots>& hosts);

// The rank-step arguments that carry the plan options to every rank:
// {"--rank-step", "--bind", "gpu", ..., "--", PROGRAM, ARGS...}.
std::vector<std::string> rank_step_args(const Options& options);

}  // namespace synk::launch
