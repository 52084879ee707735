// Parsing synkrun's options with CLI11. synkrun first finds where PROGRAM starts (the first
// word that is neither an option nor an option's value, or the word after "--"), then hands
// only the words before it to CLI11, so PROGRAM's flags never reach CLI11.
#include "options.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

namespace synk::launch {
namespace {

struct Raw {
  bool np_given = false;
  std::string np, bind, gpus;
  int gpus_per_rank = 1;
  std::vector<std::string> exports;
  std::string timeout;
};

// Beyond this, a duration is a typo, not a job: seconds past about 9.2e9 overflow the
// nanoseconds of a deadline (which then passed at once). (kMaxRanks: hosts.h.)
constexpr double kMaxTimeoutSeconds = 1e9;  // about 31 years

// An option given an empty value ("--gpus $LIST" with LIST unset) is an error, not the default.
const CLI::Validator kNotEmpty(
    [](const std::string& s) { return s.empty() ? std::string("an empty value") : std::string(); },
    "");

void define(CLI::App& app, Options& o, Raw& raw, std::vector<std::string>& program_help) {
  app.description(
      "synkrun: start PROGRAM on one rank per GPU (or -np N ranks), each bound to the cores\n"
      "nearest its GPU, through Open MPI's mpirun. Options end at PROGRAM or at \"--\".");
  // Shown in --help only: split_args hands CLI11 the words before PROGRAM, never PROGRAM.
  app.add_option("PROGRAM", program_help, "the program to run on every rank, then its arguments");
  app.add_option("-n,--np", raw.np,
                 "number of ranks (also -np N); default: one per GPU (with -H or --hostfile: "
                 "one per slot of the hosts)")
      ->type_name("N");
  app.add_option("-H,--host", o.hosts,
                 "hosts and slots, host:slots,... (passed to mpirun; a host without :slots has "
                 "1; beside --hostfile, these are the job's hosts and slots, as mpirun takes them)")
      ->type_name("HOSTS")
      ->check(kNotEmpty);
  app.add_option("--hostfile", o.hostfile, "hostfile (passed to mpirun)")
      ->type_name("FILE")
      ->check(kNotEmpty);
  app.add_option("--bind", raw.bind,
                 "gpu|numa|core|none: bind each rank to the cores near its GPU, to a NUMA node, "
                 "to disjoint cores spread over NUMA nodes, or not at all (default: gpu when "
                 "the node has a GPU for every rank, else core; --bind gpu with too few GPUs is "
                 "an error)")
      ->type_name("MODE")
      ->check(kNotEmpty);
  app.add_option("--gpus", raw.gpus, "GPU indexes ranks may use, e.g. 0-3,6 (PCI bus-id order)")
      ->type_name("LIST")
      ->check(kNotEmpty);
  app.add_option("--gpus-per-rank", raw.gpus_per_rank, "GPUs per rank (default 1)")->type_name("K");
  app.add_flag("--report-bindings", o.report_bindings,
               "each rank prints its host, rank, GPU, cpus and NUMA node on stderr");
  app.add_flag("--dry-run", o.dry_run, "print the plan and the mpirun command; start nothing");
  app.add_flag("--json", o.json, "with --dry-run: print the plan as JSON");
  app.add_option("--topology", o.topology,
                 "with --dry-run: plan for this hwloc XML topology, not this machine")
      ->type_name("FILE.xml")
      ->check(kNotEmpty);
  app.add_option("-x", raw.exports,
                 "export VAR (or set VAR=VALUE) on every rank; repeatable. With -H or "
                 "--hostfile, every SYNK_* variable set here reaches every host's ranks "
                 "without -x")
      ->type_name("VAR[=VALUE]");
  app.add_option("--timeout", raw.timeout,
                 "stop every rank after SECONDS; exit code 124 (default 0: no time limit)")
      ->type_name("SECONDS")
      ->check(kNotEmpty);
  app.set_version_flag("--version", "synkrun (synk " SYNK_VERSION_TEXT ")",
                       "print synkrun's version and exit");
  app.add_flag("--rank-step", o.rank_step,
               "be the step synkrun runs on each rank, under another launcher (srun --mpi=pmix "
               "synkrun --rank-step PROGRAM): bind the rank from its node's plan, export SYNK_*, "
               "exec PROGRAM");
  app.add_option("--node-topology", o.node_topology, "internal: MACHINE=FILE.xml")->group("");
  app.add_option("--node-slots", o.node_slots, "internal: host:slots,... as mpirun maps them")
      ->group("");
  app.add_flag("--plan-shown", o.plan_shown, "internal: the node's plan notes were shown")
      ->group("");
  app.footer(
      "Each rank gets SYNK_RANK, SYNK_WORLD_SIZE, SYNK_LOCAL_RANK, SYNK_LOCAL_SIZE,\n"
      "SYNK_NODE_RANK, SYNK_GPU, SYNK_CPUS, CUDA_DEVICE_ORDER=PCI_BUS_ID and\n"
      "CUDA_VISIBLE_DEVICES. Exit code: the first failing rank's; 124 on --timeout;\n"
      "127 (126) when PROGRAM is not found (cannot be run); 2 on a usage error;\n"
      "128 + N when signal N stopped the job (141: synkrun's stderr was closed).\n"
      "Whatever ends synkrun, even SIGKILL, ends the job (but on a host mpirun\n"
      "can no longer reach, whose ranks it cannot tell).\n"
      "Like mpirun, a PROGRAM without a slash is looked up on PATH, then in the\n"
      "current directory. On a node with GPUs, a CUDA_VISIBLE_DEVICES already set\n"
      "here needs --gpus LIST (which GPUs the ranks may use).");
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// "unknown option A", and for mpirun's own options where an mpirun user would reach for them,
// where their settings go instead.
std::string unknown_option_text(const std::string& a) {
  static const char* const kMpirunOptions[] = {
      "--mca",     "-mca",     "--map-by",  "-map-by",   "--bind-to",       "-bind-to",
      "--rank-by", "-rank-by", "-N",        "--npernode", "-npernode",      "--oversubscribe",
      "-oversubscribe",        "-wdir",     "--wdir"};
  const std::string name = a.substr(0, a.find('='));
  for (const char* o : kMpirunOptions) {
    if (name != o) continue;
    return "unknown option " + a + ": synkrun passes no mpirun options on; MCA parameters go "
           "in the environment (OMPI_MCA_name=value), and synkrun maps and binds the ranks "
           "itself (--bind, --gpus)";
  }
  return "unknown option " + a;
}

// Splits args into the options part and PROGRAM [ARGS...]. Returns an error or "".
std::string split_args(CLI::App& app, const std::vector<std::string>& args,
                       std::vector<std::string>& opts, std::vector<std::string>& program) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--") {
      program.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      return "";
    }
    if (a.size() < 2 || a[0] != '-') {  // PROGRAM ("-" alone counts as a word)
      program.assign(args.begin() + static_cast<long>(i), args.end());
      return "";
    }
    if (a == "-np") a = "-n";  // CLI11 would read -np as -n p
    if (starts_with(a, "-np=")) a = "-n" + a.substr(4);
    if (starts_with(a, "-np") && a.size() > 3 && std::isdigit(static_cast<unsigned char>(a[3]))) {
      a = "-n" + a.substr(3);  // -np2, as -n2
    }
    std::string name = a, attached;
    bool has_attached = false;
    if (starts_with(a, "--")) {
      if (const auto eq = a.find('='); eq != std::string::npos) {
        name = a.substr(0, eq);
        has_attached = true;
      }
    } else if (a.size() > 2) {  // -n4, -xFOO=1, and -H=host as --host=host
      name = a.substr(0, 2);
      has_attached = true;
      if (a[2] == '=') a.erase(2, 1);
    }
    const CLI::Option* opt = app.get_option_no_throw(name);
    if (opt == nullptr && name != "-h" && name != "--help" && name != "--version") {
      return unknown_option_text(a);
    }
    opts.push_back(a);
    const bool takes_value = opt != nullptr && opt->get_items_expected_max() > 0;
    if (takes_value && !has_attached) {
      if (i + 1 >= args.size()) return "option " + a + " needs a value";
      // "-H -np 2 prog": the next option is not -H's value (a negative number may be a
      // value, and is refused later with the option's own message).
      const std::string& next = args[i + 1];
      if (next.size() > 1 && next[0] == '-' && !(next[1] >= '0' && next[1] <= '9')) {
        return "option " + a + " needs a value (got the option " + next + ")";
      }
      opts.push_back(args[++i]);
    } else if (!takes_value && has_attached && starts_with(a, "--")) {
      return "option " + name + " takes no value";
    } else if (!takes_value && has_attached) {
      return unknown_option_text(a);
    }
  }
  return "";
}


std::string seconds_text(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// Options of synkrun's own launch have no meaning on a rank that another launcher started.
std::string rank_step_error(const Options& o, const Raw& raw) {
  if (o.dry_run || o.json) {
    return std::string(o.dry_run ? "--dry-run" : "--json") +
           " has no meaning with --rank-step, which runs PROGRAM (synkrun --dry-run without "
           "--rank-step shows the plan)";
  }
  const char* given = raw.np_given            ? "-np"
                      : !o.hosts.empty()      ? "-H"
                      : !o.hostfile.empty()   ? "--hostfile"
                      : !raw.exports.empty()  ? "-x"
                      : !raw.timeout.empty()  ? "--timeout"
                                              : nullptr;
  if (given == nullptr) return "";
  return std::string(given) +
         " has no meaning with --rank-step: the launcher that started this rank (srun, mpirun) "
         "sets the ranks, their hosts, environment and time limit";
}

// --gpus: a list of GPU numbers, none twice (on any node: refused here, not on each node once
// mpirun has started the job).
std::string check_gpus(Options& o, const std::string& gpus) {
  if (gpus.empty()) return "";
  try {
    const std::vector<unsigned> list = parse_list(gpus);
    std::set<unsigned> seen;
    for (unsigned g : list) {  // past INT_MAX it turned negative: "GPU -1 does not exist"
      if (g > static_cast<unsigned>(std::numeric_limits<int>::max())) {
        return "--gpus: GPU " + std::to_string(g) + " does not exist";
      }
      if (!seen.insert(g).second) return "--gpus: GPU " + std::to_string(g) + " is listed twice";
    }
    o.plan.gpus = std::vector<int>(list.begin(), list.end());
  } catch (const PlanError& e) {
    return std::string("--gpus: ") + e.what();
  }
  return "";
}

// -x: each VAR or VAR=VALUE, VAR a name the shell takes.
std::string check_exports(const std::vector<std::string>& exports) {
  for (const std::string& x : exports) {
    const std::string var = x.substr(0, x.find('='));
    const bool ok = !var.empty() &&
                    var.find_first_not_of(
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                        "0123456789_") == std::string::npos &&
                    !(var[0] >= '0' && var[0] <= '9');
    if (!ok) return "-x: \"" + x + "\" is not VAR or VAR=VALUE";
  }
  return "";
}

// --timeout: decimal seconds from 0 (no limit) to kMaxTimeoutSeconds.
std::string check_timeout(Options& o, const std::string& timeout) {
  if (timeout.empty()) return "";
  double t = 0;  // from_chars: decimal only (strtod took 0x10 as 16)
  const char* first = timeout.data();
  const char* last = first + timeout.size();
  const auto [end, ec] = std::from_chars(first, last, t);
  if (ec != std::errc() || end != last || !(t >= 0) || !std::isfinite(t)) {
    return "--timeout: \"" + timeout + "\" is not a number of seconds >= 0";
  }
  if (t > kMaxTimeoutSeconds) {
    return "--timeout: " + seconds_text(t) + " s is more than " +
           seconds_text(kMaxTimeoutSeconds) + " s; 0 means no time limit";
  }
  o.timeout_s = t;
  return "";
}

std::string finish(Options& o, const Raw& raw) {
  if (raw.np_given) {
    o.np = parse_count(raw.np, kMaxRanks);
    if (!o.np) {
      return "-np: \"" + raw.np + "\" is not a number of ranks (a whole number from 1 to " +
             std::to_string(kMaxRanks) + ")";
    }
  }
  if (!o.hosts.empty()) {
    std::vector<HostSlots> hosts;
    if (std::string err = parse_host_list(o.hosts, hosts); !err.empty()) return err;
    const long long slots = total_slots(hosts).value_or(0);  // -H's slots are all known
    // mpirun refuses this too, in 20 lines that name synkrun as the program. Its -H gives the
    // hosts and slots even beside a hostfile (Open MPI 4.1), whose slots= it then ignores.
    if (o.np && *o.np > slots) {
      return "-np " + std::to_string(*o.np) + " but -H " + o.hosts + " offers " +
             std::to_string(slots) + (slots == 1 ? " slot" : " slots") +
             " (a host without :SLOTS has 1); for more ranks than a host's cores, give it "
             "more slots";
    }
  }
  if (!raw.bind.empty()) {
    o.plan.bind = parse_bind_mode(raw.bind);
    if (!o.plan.bind) return "--bind: \"" + raw.bind + "\" is not one of gpu, numa, core, none";
  }
  if (std::string err = check_gpus(o, raw.gpus); !err.empty()) return err;
  if (raw.gpus_per_rank < 1) {
    return "--gpus-per-rank: " + std::to_string(raw.gpus_per_rank) + " is not >= 1";
  }
  o.plan.gpus_per_rank = raw.gpus_per_rank;
  if (std::string err = check_exports(raw.exports); !err.empty()) return err;
  o.exports = raw.exports;
  if (std::string err = check_timeout(o, raw.timeout); !err.empty()) return err;
  if (o.rank_step) {
    if (std::string err = rank_step_error(o, raw); !err.empty()) return err;
  }
  if (o.json && !o.dry_run) return "--json goes with --dry-run";
  // Ranks bind to the cores that file describes: on this machine they may not exist.
  if (!o.topology.empty() && !o.dry_run && !o.rank_step) {
    return "--topology plans for another machine and goes with --dry-run";
  }
  if (o.program.empty() && !o.dry_run)
    return "missing PROGRAM: synkrun [options] [--] PROGRAM [ARGS...]";
  return "";
}

}  // namespace

ParseResult parse_options(const std::vector<std::string>& args) {
  ParseResult result;
  Options& o = result.options;
  Raw raw;
  CLI::App app;
  app.name("synkrun");
  std::vector<std::string> program_help;
  define(app, o, raw, program_help);

  std::vector<std::string> opts;
  std::string err = split_args(app, args, opts, o.program);
  if (err.empty()) {
    try {
      std::vector<std::string> reversed(opts.rbegin(), opts.rend());  // CLI11 pops from the back
      app.parse(reversed);
    } catch (const CLI::CallForHelp&) {
      result.status = ParseResult::Status::help;
      result.text = app.help();
      return result;
    } catch (const CLI::CallForVersion& e) {
      result.status = ParseResult::Status::help;  // printed, exit 0
      result.text = std::string(e.what()) + "\n";
      return result;
    } catch (const CLI::ParseError& e) {
      err = e.what();
    }
  }
  raw.np_given = app.count("--np") > 0;
  if (err.empty()) err = finish(o, raw);
  if (!err.empty()) {
    result.status = ParseResult::Status::error;
    if (const auto nl = err.find('\n'); nl != std::string::npos) err.resize(nl);
    result.text = err;
  }
  return result;
}

std::string check_files(const Options& o) {
  std::error_code ec;
  for (const auto& [path, what] : {std::pair{o.hostfile, "hostfile"},
                                   std::pair{o.topology, "topology file"}}) {
    if (path.empty()) continue;
    if (std::filesystem::is_directory(path, ec)) return std::string(what) + " " + path +
                                                        " is a directory";
    if (::access(path.c_str(), R_OK) != 0) return std::string("cannot read ") + what + " " + path;
  }
  return "";
}

std::string read_hostfile(const Options& o, long long default_slots,
                          std::vector<HostSlots>& out) {
  std::ifstream in(o.hostfile);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return "cannot read hostfile " + o.hostfile;
  if (std::string err = parse_hostfile(text.str(), default_slots, out); !err.empty()) {
    return "hostfile " + o.hostfile + ", " + err;
  }
  return "";
}

std::string read_job_hosts(const Options& o, long long default_slots,
                           std::vector<HostSlots>& out) {
  // -H's hosts and slots are the job's, a hostfile beside it or not, as mpirun maps them.
  return o.hosts.empty() ? read_hostfile(o, default_slots, out) : parse_host_list(o.hosts, out);
}

std::string hostfile_error(const Options& o, const std::vector<HostSlots>& hosts) {
  if (o.hostfile.empty() || !o.hosts.empty()) return "";
  // mpirun's own message ("No nodes are available") does not say that the file is to blame.
  if (hosts.empty()) return "hostfile " + o.hostfile + " names no host";
  if (std::string err = local_names_error(hosts, is_this_host); !err.empty()) {
    return "hostfile " + o.hostfile + ": " + err;
  }
  const std::optional<long long> slots = total_slots(hosts);
  if (!o.np || !slots || *o.np <= *slots) return "";
  return "-np " + std::to_string(*o.np) + " but hostfile " + o.hostfile + " offers " +
         std::to_string(*slots) + (*slots == 1 ? " slot" : " slots") +
         "; for more ranks than a host's cores, give it more slots";
}

std::vector<std::string> rank_step_args(const Options& o) {
  std::vector<std::string> a{"--rank-step"};
  if (o.plan.bind) a.insert(a.end(), {"--bind", to_string(*o.plan.bind)});
  if (o.plan.gpus) {
    std::vector<unsigned> u(o.plan.gpus->begin(), o.plan.gpus->end());
    // The order matters (ranks take GPUs in the listed order), so no range compression.
    std::string list;
    for (unsigned g : u) {
      if (!list.empty()) list += ',';
      list += std::to_string(g);
    }
    a.insert(a.end(), {"--gpus", list});
  }
  if (o.plan.gpus_per_rank != 1) {
    a.insert(a.end(), {"--gpus-per-rank", std::to_string(o.plan.gpus_per_rank)});
  }
  if (!o.topology.empty()) a.insert(a.end(), {"--topology", o.topology});
  if (!o.node_topology.empty()) a.insert(a.end(), {"--node-topology", o.node_topology});
  if (!o.node_slots.empty()) a.insert(a.end(), {"--node-slots", o.node_slots});
  // Without hosts synkrun plans this node before the start and shows the notes itself.
  if (o.hosts.empty() && o.hostfile.empty()) a.push_back("--plan-shown");
  if (o.report_bindings) a.push_back("--report-bindings");
  a.push_back("--");
  a.insert(a.end(), o.program.begin(), o.program.end());
  return a;
}

}  // namespace synk::launch
