// run_job: fork+exec mpirun in its own process group, then one poll loop over its stderr pipe
// and a signalfd (the signals that end synkrun forwarded to the group as a stop, SIGUSR1 and
// SIGUSR2 passed on; SIGCHLD ends the loop), with the --timeout deadline as the poll timeout.
#include "job.h"

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
#include <chrono>
#include <cstdio>
#include <cstring>
#include <regex>
#include <stdexcept>

#include "core/write_all.h"

namespace synk::launch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kKillGraceSeconds = 3.0;
// After a forwarded SIGINT/SIGTERM/SIGHUP mpirun normally ends the job within a second or two;
// one seen still up 19 minutes later (its ranks zombies) is killed, with its group, after this.
// A second such signal kills at once, as a second Ctrl-C does to mpirun.
constexpr double kSignalGraceSeconds = 10.0;

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
  const sigset_t& old() const { return old_; }

 private:
  sigset_t set_, old_;
};

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

int status_to_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

void FailureParser::feed_line(const std::string& line) {
  if (rank_) return;  // the first failure only
  static const std::regex name(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
  static const std::regex code(R"(Exit code:\s*(-?\d+))");
  static const std::regex noticed(
      R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+))");
  // Only MPI_COMM_WORLD's numbers are the job's ranks (in a split communicator they are not).
  static const std::regex abort_rank(
      R"(MPI_ABORT was invoked on rank (\d+) in communicator MPI_COMM_WORLD)");
  static const std::regex abort_code(R"(^\s*with errorcode (-?\d+))");
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
    signal_ = std::stoi(m[2]);
  }
}

std::string FailureParser::describe() const {
  if (!rank_) return "";
  std::string out = "rank " + std::to_string(*rank_);
  if (code_) out += (aborted_ ? " (MPI_Abort, error code " : " (exit code ") +
                   std::to_string(*code_) + ")";
  if (signal_) {
    const char* name = strsignal(*signal_);
    out += " (signal " + std::to_string(*signal_) + (name ? std::string(", ") + name : "") + ")";
  }
  return out;
}

JobResult run_job(const std::vector<std::string>& argv, double timeout_s) {
  JobResult result;
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

  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  const pid_t self = getpid();
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    // Whatever ends synkrun, SIGKILL included, mpirun gets SIGTERM and stops its ranks: the job
    // never runs on unsupervised. (Sent when this thread, synkrun's only one, ends.)
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != self) _exit(128 + SIGTERM);
    setpgid(0, 0);
    dup2(err_write.get(), STDERR_FILENO);
    sigprocmask(SIG_SETMASK, &blocked.old(), nullptr);
    execvp(cargv[0], cargv.data());
    const std::string msg =
        std::string("synkrun: cannot run ") + cargv[0] + ": " + std::strerror(errno) + "\n";
    detail::write_all(p[1], msg.data(), msg.size());
    _exit(127);
  }
  setpgid(child, child);  // also here: whichever runs first, the group exists before any kill
  err_write.reset();
  if (own_tty) {
    signal(SIGTTOU, SIG_IGN);
    tcsetpgrp(STDIN_FILENO, child);
  }

  const auto start = Clock::now();
  const auto deadline = start + seconds(timeout_s);
  Clock::time_point kill_at{}, drain_until{};
  bool kill_pending = false, draining = false;
  std::string kill_reason;
  std::string line;
  bool child_done = false, pipe_open = true, relay = true;
  int status = 0;

  while (!child_done || pipe_open) {
    int wait_ms = -1;
    const auto now = Clock::now();
    auto limit_to = [&](Clock::time_point t) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count();
      // At most an hour a poll: past 2^31 ms (--timeout 3e6) the int went negative, which poll
      // takes as no timeout at all.
      const int m = static_cast<int>(std::clamp<long long>(ms, 0, 3600 * 1000) + 1);
      wait_ms = wait_ms < 0 ? m : std::min(wait_ms, m);
    };
    if (timeout_s > 0 && !result.timed_out) limit_to(deadline);
    if (kill_pending) limit_to(kill_at);
    if (draining) limit_to(drain_until);

    pollfd fds[2] = {{sigfd.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
    const int n = poll(fds, pipe_open ? 2 : 1, wait_ms);
    if (n < 0 && errno != EINTR) break;

    if (n > 0 && (fds[0].revents & POLLIN)) {
      signalfd_siginfo si;
      if (read(sigfd.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        const int sig = static_cast<int>(si.ssi_signo);
        if (!is_stop_signal(sig)) {
          if (sig != SIGCHLD && !child_done) kill(child, sig);  // mpirun passes it on
        } else if (!child_done && !(sig == SIGPIPE && result.forwarded_signal)) {
          // (A SIGPIPE after a stop is the closed stderr again, not a second request.)
          kill(-child, signal_for_mpirun(sig));
          if (!result.forwarded_signal) {
            result.forwarded_signal = sig;
            if (!kill_pending) {
              kill_at = Clock::now() + seconds(kSignalGraceSeconds);
              kill_pending = true;
              kill_reason = "after signal " + std::to_string(sig);
            }
          } else {
            kill_at = Clock::now();  // the second one: no more waiting
            kill_pending = true;
            kill_reason = "after a second signal";
          }
        }
      }
    }
    if (pipe_open && n > 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      char buf[4096];
      const ssize_t r = read(err_read.get(), buf, sizeof buf);
      if (r <= 0) {
        pipe_open = false;
      } else {
        // Once stderr is closed, mpirun's lines are still read (for the failing rank) but no
        // longer written: each write would raise another SIGPIPE.
        if (relay) relay = detail::write_all(STDERR_FILENO, buf, static_cast<std::size_t>(r));
        for (ssize_t i = 0; i < r; ++i) {
          if (buf[i] == '\n') {
            result.failure.feed_line(line);
            line.clear();
          } else if (line.size() < 4096) {
            line += buf[i];
          }
        }
      }
    }
    if (!child_done && waitpid(child, &status, WNOHANG) == child) {
      child_done = true;
      // Ranks may still hold the pipe if mpirun died hard; drain briefly, then stop.
      drain_until = Clock::now() + std::chrono::seconds(1);
      draining = true;
    }
    const auto after = Clock::now();
    if (draining && after >= drain_until) break;
    if (timeout_s > 0 && !result.timed_out && !child_done && after >= deadline) {
      result.timed_out = true;
      std::fprintf(stderr, "synkrun: timeout after %g s: stopping every rank\n", timeout_s);
      kill(-child, SIGTERM);
      kill_at = after + seconds(kKillGraceSeconds);
      kill_pending = true;
      kill_reason.clear();  // the timeout's own message said it
    }
    if (kill_pending && !child_done && after >= kill_at) {
      if (!kill_reason.empty()) {
        std::fprintf(stderr, "synkrun: mpirun still running %s: killing the job (SIGKILL)\n",
                     kill_reason.c_str());
      }
      kill(-child, SIGKILL);
      kill_pending = false;
    }
  }
  if (!line.empty()) result.failure.feed_line(line);
  if (!child_done) waitpid(child, &status, 0);
  if (own_tty) tcsetpgrp(STDIN_FILENO, getpgrp());

  result.exit_code = result.timed_out ? 124 : status_to_code(status);
  return result;
}

}  // namespace synk::launch
