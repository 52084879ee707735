// The mpirun command line synkrun runs: mpirun's own options, then synkrun itself in rank-step
// mode on every rank, then PROGRAM. A pure function of the options and a few facts.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "options.h"

namespace synk::launch {

struct MpirunContext {
  std::string mpirun;          // path of mpirun
  std::string self;            // path of synkrun, run on every rank as the rank step
  int nranks = 1;              // resolved -np; 0: none (mpirun starts a rank per slot)
  bool as_root = false;        // euid 0: Open MPI refuses without --allow-run-as-root
  bool oversubscribe = false;  // more ranks than this node's cores, one node
  // The SYNK_* variables set where synkrun starts (synk_variables): with hosts, each becomes
  // "-x NAME" unless -x names it or the rank step sets it, for mpirun forwards only -x's.
  std::vector<std::string> synk_env;
  // Other hosts are reached through ssh, Open MPI's default agent, with no rsh setting of the
  // user's (default_ssh_agent): mpirun then gets kSshArgs.
  bool ssh_defaults = false;
  // Where the ranks' Open MPI shared memory goes (JobShmDir), or "": Open MPI's default.
  std::string shm_dir;
  // The user's setting turns off mpirun's abort on a rank's non-zero exit (abort_turned_off):
  // mpirun gets it back on the command line.
  bool restore_abort = false;
};

// ssh's options for a job across hosts: a host that does not answer fails in 10 s, not after
// TCP's minutes, and one that would ask for a password fails at once instead of waiting for it.
inline constexpr const char* kSshArgs = "-o BatchMode=yes -o ConnectTimeout=10";

std::vector<std::string> mpirun_command(const Options& options, const MpirunContext& context);

// The first executable file `name` in `path` (PATH's text, entries split at ':', an empty one
// the current directory), or "".
std::string find_on_path(const char* path, const std::string& name);

// Whether mpirun would reach other hosts with a plain ssh: ssh is on PATH (else Open MPI falls
// back to rsh), and neither the environment nor the MCA parameter files (`mca_files`, as
// "name = value" lines) set plm_rsh_agent or plm_rsh_args (nor their old orte_/pls_ names).
bool default_ssh_agent(const std::function<const char*(const char*)>& getenv,
                       const std::vector<std::string>& mca_files);

// Where Open MPI is told to start ranks on this node only ("OMPI_MCA_plm=isolated", or
// "plm = isolated in FILE"), as some container images do; "" where it is not, or where
// OMPI_MCA_mca_base_param_files names files of the user's. `mca_files` go from the one that
// wins. mpirun then reports another host as "already filled".
std::string isolated_launcher(const std::function<const char*(const char*)>& getenv,
                              const std::vector<std::string>& mca_files);

// Where Open MPI is told not to end the job when a rank exits non-zero
// ("OMPI_MCA_orte_abort_on_non_zero_status=0", or "orte_abort_on_non_zero_status = 0 in FILE"),
// as some sites do; "" where it is not. mpirun then lets the others run on and exits 0 for a
// failed job (Open MPI 4.1), where synkrun promises the first failing rank's exit code.
std::string abort_turned_off(const std::function<const char*(const char*)>& getenv,
                             const std::vector<std::string>& mca_files);

// Where Open MPI is told never to run more ranks on a node than it has slots
// ("OMPI_MCA_rmaps_base_no_oversubscribe=1", or a mapping policy with NOOVERSUBSCRIBE, from the
// environment or the MCA parameter files); "" where it is not. mpirun then refuses synkrun's
// --oversubscribe ("Conflicting directives for mapping policy").
std::string oversubscription_refused(const std::function<const char*(const char*)>& getenv,
                                     const std::vector<std::string>& mca_files);

// Whether the user chose where Open MPI keeps its shared memory (btl_vader_backing_directory,
// or Open MPI 5's btl_sm_backing_directory, in the environment or the MCA parameter files, or
// files of their own): synkrun then leaves it alone.
bool user_sets_shm_dir(const std::function<const char*(const char*)>& getenv,
                       const std::vector<std::string>& mca_files);

// The names of the SYNK_* variables in `env` (a null-terminated NAME=VALUE array), sorted.
std::vector<std::string> synk_variables(const char* const* env);

// The command as one shell-quoted line, for --dry-run.
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace synk::launch
