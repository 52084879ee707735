// run_job: fork+exec mpirun in its own process group, then one poll loop over its stderr pipe
// and a signalfd (the signals that end synkrun forwarded to the group as a stop, SIGUSR1 and
// SIGUSR2 passed on to the ranks; SIGCHLD ends the loop), with the --timeout deadline as the
// poll timeout.
#include "job.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/write_all.h"

namespace synk::launch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kKillGraceSeconds = 3.0;
// After a forwarded SIGINT/SIGTERM/SIGHUP mpirun normally ends the job within a second or two;
// one seen still up 19 minutes later (its ranks zombies) is killed, with its group, after this.
// A second such signal kills at once, as a second Ctrl-C does to mpirun.
constexpr double kSignalGraceSeconds = 10.0;
// The same signal from the same process again this soon is the same request, not a second one:
// GNU timeout sends its signal to synkrun and then, microseconds later, to its process group.
constexpr auto kRepeatedSignalWindow = std::chrono::milliseconds(250);
// After mpirun reports the job failed it ends its ranks and exits, within a second or two; one
// still up this much later waits for a daemon it cannot reach (a host off the network), and
// would wait for TCP to give up, minutes or hours: synkrun stops it.
constexpr double kFailureGraceSeconds = 10.0;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Signals that end synkrun by default and so stop the job. SIGPIPE also comes from a write to
// a closed stderr (`synkrun ... 2>&1 | head -1`): blocked, the write fails with EPIPE instead.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
// Signals mpirun passes on to the ranks (Open MPI's ess_base_forward_signals).
constexpr int kPassedSignals[] = {SIGUSR1, SIGUSR2};

bool is_stop_signal(int sig) {
  return std::find(std::begin(kStopSignals), std::end(kStopSignals), sig) !=
         std::end(kStopSignals);
}

// What mpirun gets for a stop signal: SIGQUIT and SIGPIPE would end it on the spot, without
// stopping its ranks; SIGTERM makes it stop them first.
int signal_for_mpirun(int sig) { return sig == SIGQUIT || sig == SIGPIPE ? SIGTERM : sig; }

// Keeps the stop and passed signals and SIGCHLD blocked (read from a signalfd) while it lives.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    for (int s : kStopSignals) sigaddset(&set_, s);
    for (int s : kPassedSignals) sigaddset(&set_, s);
    sigaddset(&set_, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set_, &old_);
  }
  ~BlockedSignals() { sigprocmask(SIG_SETMASK, &old_, nullptr); }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;
  const sigset_t& set() const { return set_; }
  // The mask the job starts with: synkrun's own, less the signals synkrun passes on to it. One
  // inherited blocking them (as a service's runner may leave it) kept mpirun from acting on them.
  sigset_t job_mask() const {
    sigset_t mask = old_;
    for (int s : kStopSignals) sigdelset(&mask, s);
    for (int s : kPassedSignals) sigdelset(&mask, s);
    return mask;
  }

 private:
  sigset_t set_, old_;
};

// A /proc file of `pid`, or what could be read of it: the process may end while it is read,
// and a read then fails with ESRCH (std::ifstream threw that out of synkrun).
std::string proc_file(long pid, const char* name) {
  const std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return out;
}

// The live children of process `parent` (zombies left out).
std::vector<pid_t> live_children(pid_t parent) {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    const std::string stat = proc_file(pid, "stat");
    const std::size_t close = stat.rfind(')');  // the command may hold spaces and parentheses
    char state = 0;
    long ppid = 0;
    if (close != std::string::npos &&
        std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 &&
        ppid == parent && state != 'Z') {
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return out;
}

// Whether `pid` is a rank of the job or a process a rank started: it has a rank's environment.
bool is_rank_process(pid_t pid) {
  const std::string env = '\0' + proc_file(pid, "environ");
  return env.find(std::string("\0OMPI_COMM_WORLD_RANK=", 22)) != std::string::npos ||
         env.find(std::string("\0PMIX_RANK=", 11)) != std::string::npos;
}

// What to signal to reach the ranks mpirun started on this node as mpirun does: each rank's
// process group (-pgid, Open MPI's default), or the rank alone where it leads none. Nothing
// where mpirun has no child or one that is not a rank (by its environment): an ssh or srun
// starting daemons on other hosts, whose ranks only mpirun reaches.
std::vector<pid_t> local_rank_targets(pid_t mpirun) {
  const std::vector<pid_t> ranks = live_children(mpirun);
  std::vector<pid_t> targets;
  for (pid_t r : ranks) {
    if (!is_rank_process(r)) return {};
    targets.push_back(getpgid(r) == r ? -r : r);
  }
  return targets;
}

// Sends `sig` to them; false where there are none.
bool signal_local_ranks(pid_t mpirun, int sig) {
  const std::vector<pid_t> targets = local_rank_targets(mpirun);
  for (pid_t t : targets) kill(t, sig);
  return !targets.empty();
}

// The time a process started (field 22 of /proc/PID/stat, in clock ticks since boot), or -1:
// with its pid, what names it across the pid's reuse.
long long start_time_of(pid_t pid) {
  const std::string stat = proc_file(pid, "stat");
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));  // from field 3, the state
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::atoll(field.c_str());
  }
  return -1;
}

// "pid 42 (sleep)", for messages.
std::string describe_process(pid_t pid) {
  std::string name = proc_file(pid, "comm");
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return "pid " + std::to_string(pid) + (name.empty() ? "" : " (" + name + ")");
}

// A rank's process group, as it was when synkrun stopped the job.
struct RankGroup {
  pid_t pgid;
  long long leader_start;
};

// The process groups that mpirun's ranks on this node lead (Open MPI's default), whatever its
// other children (an ssh to other hosts' daemons): what is left of them once the job is
// stopped goes with it.
std::vector<RankGroup> local_rank_groups(pid_t mpirun) {
  std::vector<RankGroup> out;
  for (pid_t r : live_children(mpirun)) {
    if (!is_rank_process(r)) continue;
    if (getpgid(r) != r) continue;  // none of its own: mpirun's kill of it is enough
    out.push_back({r, start_time_of(r)});
  }
  return out;
}

// SIGKILL to what is left of each group. The leader's pid names the group as long as any member
// lives (Linux reuses neither meanwhile); a process of that pid that started at another time is
// a new group's leader, and is spared.
void kill_rank_groups(const std::vector<RankGroup>& groups) {
  for (const RankGroup& g : groups) {
    const long long now = start_time_of(g.pgid);
    if (now >= 0 && now != g.leader_start) continue;
    kill(-g.pgid, SIGKILL);
  }
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// A rank's number in a rank's own text: one past int is nullopt, not thrown.
std::optional<int> rank_number(const std::string& digits) {
  int rank = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return rank;
}

int status_to_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

void FailureParser::feed_job_line(const std::string& line) {
  static const std::regex host_line(R"(^\s*(Local|Remote) host:\s*(\S+))");
  static const std::regex remote_daemon(R"(^\s*Remote daemon:\s*\S+ on node (\S+))");
  std::smatch m;
  if (line.find("ORTE was unable to reliably start one or more daemons") != std::string::npos ||
      line.find("ORTE has lost communication with a remote daemon") != std::string::npos ||
      line.find("An ORTE daemon has unexpectedly failed") != std::string::npos) {
    daemons_failed_ = failing_ = true;
  } else if (line.find("There are not enough slots available in the system") !=
             std::string::npos) {
    slots_short_ = failing_ = true;
  } else if (line.find("Per user-direction, the job has been aborted.") != std::string::npos) {
    failing_ = true;
  } else if (lost_daemon_host_.empty() && std::regex_search(line, m, remote_daemon)) {
    lost_daemon_host_ = m[1];
  } else if (line.find("unable to complete a TCP connection") != std::string::npos) {
    in_tcp_message_ = true;
  } else if (in_tcp_message_ && std::regex_search(line, m, host_line)) {
    if (m[1] == "Local") {
      tcp_local_ = m[2];
    } else if (connection_failure_.empty()) {
      connection_failure_ = tcp_local_ + " could not connect to " + std::string(m[2]);
      in_tcp_message_ = false;
    }
  }
}

void FailureParser::feed_line(const std::string& line) {
  // mpirun frames each of its messages in rules of dashes; a rank's own stderr comes through
  // the same pipe, and a rank that prints mpirun's words outside such a frame (a log it copies)
  // must not be taken for mpirun.
  static const std::regex rule(R"(-{20,}\s*$)");
  // synk's own Timeout, a rank's line (outside mpirun's frames). A rank of a split
  // communicator is named with its job rank: "rank 1 (job rank 3)", and the job rank counts.
  static const std::regex waited(
      R"(synk Timeout: .*\(SYNK_TIMEOUT\) for ranks? (\d+)(?: \(job rank (\d+))?)");
  // Whose: "synk Timeout: rank 0: ..." (the watchdog's), "synk Timeout: all_reduce: rank 1
  // waited".
  static const std::regex gave_up(
      R"(synk Timeout: (?:.*?: )?rank (\d+)(?: \(job rank (\d+)\))?(?::| waited))");
  const auto job_rank = [](const std::smatch& m) { return rank_number(m[m[2].matched ? 2 : 1]); };
  std::smatch w;
  if (line.find("synk Timeout: ") != std::string::npos) {
    if (!waited_for_ && std::regex_search(line, w, waited)) waited_for_ = job_rank(w);
    if (std::regex_search(line, w, gave_up)) {
      if (const std::optional<int> r = job_rank(w)) timed_out_ranks_.insert(*r);
    }
  }
  if (line.find("synk Timeout: rank ") != std::string::npos &&
      line.find(" inside MPI without progress") != std::string::npos) {
    watchdog_ended_ = true;
  }
  if (std::regex_search(line, rule)) {
    lines_since_rule_ = 0;
    return;
  }
  if (lines_since_rule_ < kFrameLines) ++lines_since_rule_;
  if (lines_since_rule_ >= kFrameLines) return;
  feed_job_line(line);
  if (rank_) return;  // the first failure only
  static const std::regex name(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
  static const std::regex code(R"(Exit code:\s*(-?\d+))");
  static const std::regex noticed(
      R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+))");
  // Only MPI_COMM_WORLD's numbers are the job's ranks (in a split communicator they are not).
  static const std::regex abort_rank(
      R"(MPI_ABORT was invoked on rank (\d+) in communicator MPI_COMM_WORLD)");
  static const std::regex abort_code(R"(^\s*with errorcode (-?\d+))");
  // A rank that ended without MPI_Finalize (synk skips it after a Timeout, so that mpirun
  // ends the stuck ranks): "...process rank 0 with PID 0 on" / "node vm exiting improperly".
  static const std::regex improper_rank(R"(exited due to process rank (\d+) with PID \d+ on)");
  static const std::regex improper_node(R"(^node (\S+) exiting improperly)");
  std::smatch m;
  if (std::regex_search(line, m, abort_rank)) {
    pending_abort_rank_ = std::stoi(m[1]);
  } else if (pending_abort_rank_ && std::regex_search(line, m, abort_code)) {
    rank_ = pending_abort_rank_;
    code_ = std::stoi(m[1]);
    aborted_ = true;
  } else if (std::regex_search(line, m, name)) {
    pending_rank_ = std::stoi(m[1]);
  } else if (pending_rank_ && std::regex_search(line, m, code)) {
    rank_ = pending_rank_;
    code_ = std::stoi(m[1]);
  } else if (std::regex_search(line, m, noticed)) {
    rank_ = std::stoi(m[1]);
    node_ = m[2];
    signal_ = std::stoi(m[3]);
  } else if (std::regex_search(line, m, improper_rank)) {
    pending_improper_rank_ = std::stoi(m[1]);
  } else if (pending_improper_rank_ && std::regex_search(line, m, improper_node)) {
    rank_ = pending_improper_rank_;
    node_ = m[1];
    no_finalize_ = true;
  }
}

std::string FailureParser::describe(const std::string& mapped_host) const {
  if (!rank_) return "";
  std::string out = "rank " + std::to_string(*rank_);
  const std::string& host = node_.empty() ? mapped_host : node_;  // mpirun's name comes first
  if (!host.empty()) out += " on " + host;
  if (code_) out += (aborted_ ? " (MPI_Abort, error code " : " (exit code ") +
                   std::to_string(*code_) + ")";
  if (no_finalize_) out += " (ended without MPI_Finalize)";
  if (signal_) {
    const char* name = strsignal(*signal_);
    out += " (signal " + std::to_string(*signal_) + (name ? std::string(", ") + name : "") + ")";
  }
  return out;
}

namespace {

// Starts argv in a process group of its own with stderr into a pipe: the child's pid. Whatever
// ends synkrun, SIGKILL included, the child gets SIGTERM (and mpirun stops its ranks): the job
// never runs on unsupervised.
pid_t start_child(const std::vector<std::string>& argv, const BlockedSignals& blocked,
                  Fd& err_write) {
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t self = getpid();
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    // (PR_SET_PDEATHSIG is sent when this thread, synkrun's only one, ends.)
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != self) _exit(128 + SIGTERM);
    setpgid(0, 0);
    dup2(err_write.get(), STDERR_FILENO);
    const sigset_t mask = blocked.job_mask();
    sigprocmask(SIG_SETMASK, &mask, nullptr);
    execvp(cargv[0], cargv.data());
    const std::string msg =
        std::string("synkrun: cannot run ") + cargv[0] + ": " + std::strerror(errno) + "\n";
    detail::write_all(err_write.get(), msg.data(), msg.size());
    _exit(127);
  }
  setpgid(child, child);  // also here: whichever runs first, the group exists before any kill
  err_write.reset();
  return child;
}

// With the terminal handed to the job's process group, a Ctrl-C (or Ctrl-\\, or a hang-up)
// signals that group and not synkrun. A sentinel process in the group, doing nothing, dies of
// the same signal, so that synkrun learns which signal stopped the job (-1 if it cannot start;
// mpirun's exit code is all there is then).
pid_t start_terminal_sentinel(pid_t job_group, const BlockedSignals& blocked) {
  const pid_t self = getpid();
  const pid_t pid = fork();
  if (pid != 0) {
    if (pid > 0) setpgid(pid, job_group);  // also here, as for the child
    return pid;
  }
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != self) _exit(0);
  if (setpgid(0, job_group) != 0) _exit(0);
  for (int s : kStopSignals) signal(s, SIG_DFL);
  const sigset_t mask = blocked.job_mask();
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  for (;;) pause();
}

// Supervises a running job: one handler per event (a signal to synkrun, a chunk of mpirun's
// stderr, the child's exit, a deadline), and the poll loop that waits for the next.
class JobSupervisor {
 public:
  JobSupervisor(pid_t child, pid_t sentinel, int sigfd, int err_read, double timeout_s)
      : child_(child), sentinel_(sentinel), sigfd_(sigfd), err_read_(err_read),
        timeout_s_(timeout_s), deadline_(Clock::now() + seconds(timeout_s)) {}

  JobResult run() {
    while (!child_done_ || pipe_open_) {
      pollfd fds[2] = {{sigfd_, POLLIN, 0}, {err_read_, POLLIN, 0}};
      const int n = poll(fds, pipe_open_ ? 2 : 1, wait_ms());
      if (n < 0 && errno != EINTR) {  // nothing is watched any more: end the job, not wait
        std::fprintf(stderr, "synkrun: poll failed (%s): killing the job (SIGKILL)\n",
                     std::strerror(errno));
        if (!child_done_) kill_job();
        break;
      }
      if (n > 0 && (fds[0].revents & POLLIN)) read_signal();
      if (pipe_open_ && n > 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) read_stderr();
      reap_children();
      if (!on_time(Clock::now())) break;
    }
    if (!line_.empty()) result_.failure.feed_line(line_);
    if (!child_done_) waitpid(child_, &status_, 0);
    // A job synkrun stopped leaves nothing of its ranks behind: a rank's child that ignored
    // SIGTERM would run on, an orphan, after mpirun killed the rank alone.
    kill_stopped_rank_groups();
    if (sentinel_ > 0) {  // not reaped yet, so its pid is still its own
      kill(sentinel_, SIGKILL);
      waitpid(sentinel_, nullptr, 0);
    }
    const bool failed = !WIFEXITED(status_) || WEXITSTATUS(status_) != 0;
    if (failed || result_.forwarded_signal || result_.timed_out) kill_orphans();
    result_.exit_code = result_.timed_out ? 124 : status_to_code(status_);
    if (WIFSIGNALED(status_) && !killed_by_synkrun_) result_.mpirun_signal = WTERMSIG(status_);
    if (result_.stopped_after_failure) result_.exit_code = failing_rank_code();
    return result_;
  }

 private:
  // The failing rank's exit code (128 + its signal), else 1: what mpirun would have returned.
  int failing_rank_code() const {
    const FailureParser& f = result_.failure;
    if (f.signal()) return 128 + *f.signal();
    if (f.exit_code() && *f.exit_code() > 0 && *f.exit_code() < 256) return *f.exit_code();
    return 1;
  }

  // mpirun reported the failure and is still up, with no kill already on its way: it must end
  // by stop_at_.
  bool stop_pending() const {
    return failure_seen_ && !result_.stopped_after_failure && !child_done_ && !kill_pending_;
  }

  // Until the nearest deadline (the timeout, a pending kill, the end of the drain), or -1.
  int wait_ms() const {
    int wait = -1;
    const auto now = Clock::now();
    auto limit_to = [&](Clock::time_point t) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count();
      // At most an hour a poll: past 2^31 ms (--timeout 3e6) the int went negative, which poll
      // takes as no timeout at all.
      const int m = static_cast<int>(std::clamp<long long>(ms, 0, 3600 * 1000) + 1);
      wait = wait < 0 ? m : std::min(wait, m);
    };
    if (timeout_s_ > 0 && !result_.timed_out) limit_to(deadline_);
    if (kill_pending_) limit_to(kill_at_);
    if (draining_) limit_to(drain_until_);
    if (stop_pending()) limit_to(stop_at_);
    return wait;
  }

  void read_signal() {
    signalfd_siginfo si;
    if (read(sigfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      on_signal(static_cast<int>(si.ssi_signo), static_cast<pid_t>(si.ssi_pid));
    }
  }

  // A stop signal stops the job (SIGKILL after a grace period, or at once for a second one);
  // others but SIGCHLD go to the ranks.
  void on_signal(int sig, pid_t sender) {
    if (!is_stop_signal(sig)) {
      if (sig != SIGCHLD && !child_done_) pass_on(sig);
      return;
    }
    // (A SIGPIPE after a stop is the closed stderr again, not a second request.)
    if (sig == SIGPIPE && result_.forwarded_signal) return;
    if (child_done_) {
      // mpirun ended after the first: what it left of the ranks' groups (a child that ignores
      // SIGTERM, which mpirun's kill of the rank alone missed) goes now.
      if (result_.forwarded_signal) kill_stopped_rank_groups();
      return;
    }
    const Clock::time_point now = Clock::now();
    if (result_.forwarded_signal == sig && sender > 0 && sender == first_sender_ &&
        now - first_signal_at_ < kRepeatedSignalWindow) {
      return;
    }
    if (!result_.forwarded_signal) note_rank_groups();
    kill(-child_, signal_for_mpirun(sig));
    if (!result_.forwarded_signal) {
      result_.forwarded_signal = sig;
      first_signal_at_ = now;
      first_sender_ = sender;
      if (!kill_pending_) {
        kill_later(seconds(kSignalGraceSeconds), "after signal " + std::to_string(sig));
      }
    } else {
      kill_later(Clock::duration::zero(), "after a second signal");  // no more waiting
    }
  }

  // Where every rank is mpirun's child here, straight to them, as mpirun would pass it on: an
  // mpirun seen not to (Open MPI 4.1.6 with plm isolated) cannot lose it. Else mpirun does.
  void pass_on(int sig) {
    if (!signal_local_ranks(child_, sig)) kill(child_, sig);
  }

  // Relays mpirun's stderr and reads it, line by line, for the first failing rank. Once
  // stderr is closed, the lines are still read but no longer written: each write would raise
  // another SIGPIPE.
  void read_stderr() {
    char buf[4096];
    const ssize_t r = read(err_read_, buf, sizeof buf);
    if (r <= 0) {
      pipe_open_ = false;
      return;
    }
    if (relay_) relay_ = detail::write_all(STDERR_FILENO, buf, static_cast<std::size_t>(r));
    for (ssize_t i = 0; i < r; ++i) {
      if (buf[i] == '\n') {
        result_.failure.feed_line(line_);
        line_.clear();
        if (result_.failure.job_failing() && !failure_seen_) {
          failure_seen_ = true;
          stop_at_ = Clock::now() + seconds(kFailureGraceSeconds);
        }
      } else if (line_.size() < 4096) {
        line_ += buf[i];
      }
    }
  }

  // The terminal's signal reached the job's group: the job stops as after that signal sent to
  // synkrun, but mpirun has it already. (Signals synkrun sent the group end the sentinel too.)
  void on_sentinel_exit(int status) {
    sentinel_ = -1;
    if (!WIFSIGNALED(status) || !is_stop_signal(WTERMSIG(status))) return;
    if (child_done_ || result_.forwarded_signal || result_.timed_out) return;
    note_rank_groups();  // mpirun has the terminal's signal too, and is stopping them now
    result_.forwarded_signal = WTERMSIG(status);
    if (!kill_pending_) {
      kill_later(seconds(kSignalGraceSeconds),
                 "after signal " + std::to_string(WTERMSIG(status)) + " from the terminal");
    }
  }

  // mpirun's and the sentinel's exits, and the orphans' that came to synkrun (run_job makes it
  // their subreaper), reaped so that none stays a zombie for the job's life.
  void reap_children() {
    int status = 0;
    pid_t p = 0;
    while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
      if (p == sentinel_) {
        on_sentinel_exit(status);
      } else if (p == child_ && !child_done_) {
        on_child_exit(status);
      }
    }
  }

  // Ranks may still hold the pipe if mpirun died hard: drain it briefly, then stop.
  void on_child_exit(int status) {
    child_done_ = true;
    status_ = status;
    drain_until_ = Clock::now() + std::chrono::seconds(1);
    draining_ = true;
  }

  // The deadlines that passed: false when the loop should end (the drain is over).
  bool on_time(Clock::time_point now) {
    if (draining_ && now >= drain_until_) return false;
    if (timeout_s_ > 0 && !result_.timed_out && !child_done_ && now >= deadline_) {
      result_.timed_out = true;
      std::fprintf(stderr, "synkrun: timeout after %g s: stopping every rank\n", timeout_s_);
      note_rank_groups();
      kill(-child_, SIGTERM);
      kill_later(seconds(kKillGraceSeconds), "");  // the timeout's own message said it
    }
    if (stop_pending() && now >= stop_at_) {
      result_.stopped_after_failure = true;
      // SIGKILL: an mpirun that is aborting ends its ranks and then hangs; a SIGTERM there
      // crashed it in PMIx_Finalize (Open MPI 4.1) with a page of backtrace.
      std::fprintf(stderr,
                   "synkrun: mpirun has not ended %g s after it reported the failure (waiting for "
                   "a host it cannot reach?): killing the job (SIGKILL)\n",
                   kFailureGraceSeconds);
      kill_job();
    }
    if (kill_pending_ && !child_done_ && now >= kill_at_) {
      if (!kill_reason_.empty()) {
        std::fprintf(stderr, "synkrun: mpirun still running %s: killing the job (SIGKILL)\n",
                     kill_reason_.c_str());
      }
      kill_job();
      kill_pending_ = false;
    }
    return true;
  }

  // SIGKILL to the ranks mpirun started here, each with its process group (a rank's own
  // children: data loaders, a fork), and to mpirun's group: killed first, mpirun left them to
  // run on as orphans.
  void kill_job() {
    killed_by_synkrun_ = true;
    signal_local_ranks(child_, SIGKILL);
    kill_stopped_rank_groups();
    kill(-child_, SIGKILL);
  }

  // The ranks' process groups when synkrun stops the job (a signal, the timeout), before
  // mpirun can end or lose them.
  void note_rank_groups() {
    if (rank_groups_.empty()) rank_groups_ = local_rank_groups(child_);
  }

  // SIGKILL to what is left of them: mpirun may have ended since, having killed each rank
  // alone and left its children.
  void kill_stopped_rank_groups() { kill_rank_groups(rank_groups_); }

  // What the job left running when it failed or was stopped: processes whose parent ended
  // before them (a data loader of a rank that failed, or the ranks of a killed mpirun) come to
  // synkrun, and go now, with their process groups. mpirun kills the groups of the ranks it
  // ends, not of those that ended by themselves, and such a process held its GPU and CPU until
  // killed by hand. Only the job's own (a rank's environment): mpirun's ssh may leave a shared
  // connection master (ControlPersist) that is the user's.
  void kill_orphans() {
    std::string killed;
    std::vector<pid_t> done;
    for (int round = 0; round < 3; ++round) {  // an orphan's own children come to synkrun next
      std::vector<pid_t> left;
      for (pid_t p : live_children(getpid())) {
        if (is_rank_process(p) && std::find(done.begin(), done.end(), p) == done.end()) {
          left.push_back(p);
        }
      }
      if (left.empty()) break;
      for (pid_t p : left) {
        const pid_t group = getpgid(p);
        if (group > 0 && group != getpgrp()) kill(-group, SIGKILL);
        kill(p, SIGKILL);
        if (done.size() < 3) killed += (done.empty() ? "" : ", ") + describe_process(p);
        done.push_back(p);
      }
      reap_within(left, std::chrono::seconds(1));
    }
    if (!done.empty()) {
      std::fprintf(stderr, "synkrun: killed %zu process%s of the job left running (%s%s)\n",
                   done.size(), done.size() == 1 ? "" : "es", killed.c_str(),
                   done.size() > 3 ? ", ..." : "");
    }
  }

  // Reaps `pids` as they end, for at most `limit`: one stuck in the kernel (a GPU driver's
  // teardown, a lost NFS mount) may take long to die of SIGKILL, and synkrun does not wait on it.
  static void reap_within(std::vector<pid_t> pids, Clock::duration limit) {
    const Clock::time_point until = Clock::now() + limit;
    while (!pids.empty() && Clock::now() < until) {
      std::erase_if(pids, [](pid_t p) { return waitpid(p, nullptr, WNOHANG) != 0; });
      if (!pids.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  void kill_later(Clock::duration after, std::string reason) {
    kill_at_ = Clock::now() + after;
    kill_pending_ = true;
    kill_reason_ = std::move(reason);
  }

  pid_t child_;
  pid_t sentinel_;  // -1: none, or it has ended
  int sigfd_, err_read_;
  double timeout_s_;
  Clock::time_point deadline_;
  JobResult result_;
  bool child_done_ = false, pipe_open_ = true, relay_ = true;
  int status_ = 0;
  std::string line_;  // mpirun's stderr line being read
  bool draining_ = false;
  Clock::time_point drain_until_{};
  bool kill_pending_ = false;  // SIGKILL to the job at kill_at_
  Clock::time_point kill_at_{};
  std::string kill_reason_;
  bool failure_seen_ = false;  // mpirun reported the job failing; it must end by stop_at_
  Clock::time_point stop_at_{};
  std::vector<RankGroup> rank_groups_;  // the local ranks' groups when synkrun stopped the job
  Clock::time_point first_signal_at_{};  // when the signal that stopped the job came
  pid_t first_sender_ = 0;                // and from which process (0: the kernel, a terminal)
  bool killed_by_synkrun_ = false;        // kill_job() sent mpirun SIGKILL
};

}  // namespace

JobResult run_job(const std::vector<std::string>& argv, double timeout_s) {
  BlockedSignals blocked;
  Fd sigfd(signalfd(-1, &blocked.set(), SFD_CLOEXEC));
  if (sigfd.get() < 0) throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  Fd err_read(p[0]), err_write(p[1]);
  // With a terminal in the foreground, mpirun's group takes the terminal: Ctrl-C reaches it
  // directly, and mpirun can read stdin for rank 0.
  const bool own_tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  // Processes of the job whose parent ends first come to synkrun rather than init, so that a
  // failed job's leftovers can be found (JobSupervisor::kill_orphans).
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t child = start_child(argv, blocked, err_write);
  pid_t sentinel = -1;
  if (own_tty) {
    sentinel = start_terminal_sentinel(child, blocked);
    signal(SIGTTOU, SIG_IGN);
    tcsetpgrp(STDIN_FILENO, child);
  }
  JobResult result = JobSupervisor(child, sentinel, sigfd.get(), err_read.get(), timeout_s).run();
  if (own_tty) tcsetpgrp(STDIN_FILENO, getpgrp());
  return result;
}

}  // namespace synk::launch
