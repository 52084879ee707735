// Running mpirun for synkrun: its own process group, SIGINT/SIGTERM/SIGHUP forwarded to it,
// --timeout, and its stderr relayed and read to name the first failing rank.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace synk::launch {

// Reads mpirun's messages (line by line) for the first rank that failed:
//   "Process name: [[30945,1],1]" followed by "Exit code:    3"
//   "mpirun noticed that process rank 1 with PID 42 on node vm exited on signal 11 (...)"
//   "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD" then "with errorcode 7."
//   (Open MPI 4.1 prints this one only now and then: it may kill the job first.)
// and for the job failing as a whole: a daemon that could not start or was lost, or the job
// aborted before any rank was named ("Per user-direction, the job has been aborted."). Only
// lines within mpirun's frame count: the first kFrameLines after a rule of dashes.
class FailureParser {
 public:
  void feed_line(const std::string& line);
  std::optional<int> rank() const { return rank_; }
  std::optional<int> exit_code() const { return code_; }
  std::optional<int> signal() const { return signal_; }
  // "rank 1 on hostB (exit code 3)", or "" when none was seen. `mapped_host`, the host
  // synkrun's mapping gives the rank, names it where mpirun's message did not.
  std::string describe(const std::string& mapped_host = "") const;
  bool job_failing() const { return failing_ || rank_.has_value(); }
  bool daemons_failed() const { return daemons_failed_; }
  // mpirun found fewer slots than ranks: its page names synkrun as the program and offers an
  // --oversubscribe that synkrun does not take.
  bool slots_short() const { return slots_short_; }
  // "hostB could not connect to hostA", from Open MPI's TCP message, or "".
  const std::string& connection_failure() const { return connection_failure_; }
  // The host whose daemon mpirun lost ("Remote daemon: ... on node hostB"), or "".
  const std::string& lost_daemon_host() const { return lost_daemon_host_; }
  // The rank a rank's synk Timeout first said it waited for ("... (SYNK_TIMEOUT) for rank 2"):
  // the rank that failed first may only have given up waiting for it.
  std::optional<int> waited_for() const { return waited_for_; }
  // A rank's synk Timeout said that synk's watchdog ended it, waiting inside MPI (where the
  // rank it waited for is not known): the rank that failed first was only the one that waited.
  bool watchdog_ended() const { return watchdog_ended_; }
  // The ranks whose synk Timeout said they gave up waiting ("... rank 1 waited 10 s ...",
  // "synk Timeout: rank 0: ... has waited 12 s inside MPI"): the ranks that spoke.
  const std::set<int>& timed_out_ranks() const { return timed_out_ranks_; }

 private:
  static constexpr int kFrameLines = 16;  // mpirun's messages that name a failure are shorter
  void feed_job_line(const std::string& line);
  int lines_since_rule_ = kFrameLines;
  std::optional<int> pending_rank_, pending_abort_rank_, pending_improper_rank_;
  std::optional<int> rank_, code_, signal_, waited_for_;
  std::string node_;  // the failing rank's host, where mpirun named it
  bool aborted_ = false;  // the rank called MPI_Abort; code_ is its error code
  bool no_finalize_ = false;  // the rank exited without MPI_Finalize (mpirun: "improperly")
  bool failing_ = false, daemons_failed_ = false, in_tcp_message_ = false, slots_short_ = false;
  bool watchdog_ended_ = false;
  std::set<int> timed_out_ranks_;
  std::string tcp_local_, connection_failure_, lost_daemon_host_;
};

struct JobResult {
  int exit_code = 0;
  bool timed_out = false;
  bool stopped_after_failure = false;  // mpirun hung on after it reported the failure
  std::optional<int> forwarded_signal;  // the first signal synkrun forwarded (SIGINT...)
  std::optional<int> mpirun_signal;     // the signal mpirun itself died of, if it did
  FailureParser failure;
};

// Runs argv (argv[0] is looked up on PATH) and waits. timeout_s <= 0: no timeout. On timeout,
// SIGTERM to the job's process group, SIGKILL after a grace period, and exit_code 124.
JobResult run_job(const std::vector<std::string>& argv, double timeout_s);

}  // namespace synk::launch
