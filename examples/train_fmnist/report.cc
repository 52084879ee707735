// See report.h.
#include "report.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace fmnist {

namespace {

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// The parent of pid, from /proc/pid/stat ("pid (comm) state ppid ..."); 0 when unknown.
pid_t parent_of(pid_t pid) {
  const std::string stat = read_line("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 > stat.size()) return 0;
  return static_cast<pid_t>(std::atol(stat.c_str() + close + 4));
}

bool is_launcher(const std::string& comm) {
  for (const char* name : {"synkrun", "mpirun", "mpiexec", "orterun", "prterun", "orted", "prted",
                           "mpiexec.hydra", "hydra_pmi_proxy", "srun"}) {
    if (comm == name) return true;
  }
  return false;
}

// Whether a bar is on screen, for the signal handler below.
volatile sig_atomic_t bar_drawn = 0;

constexpr char kEraseLine[] = "\r\033[K";

// Ctrl-C reaches the ranks as SIGINT or SIGTERM (mpirun's relay): erase the bar so that
// synkrun's closing line does not run on after it, then end as the signal would have.
void erase_bar_and_die(int sig) {
  if (bar_drawn) {
    ssize_t ignored = write(STDOUT_FILENO, kEraseLine, sizeof kEraseLine - 1);
    (void)ignored;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void erase_bar_on_interrupt() {
  struct sigaction action = {};
  action.sa_handler = erase_bar_and_die;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction previous = {};
    // A handler the program or MPI installed keeps its place.
    if (sigaction(sig, nullptr, &previous) == 0 && previous.sa_handler == SIG_DFL) {
      sigaction(sig, &action, nullptr);
    }
  }
}

}  // namespace

bool stdout_is_terminal() {
  if (isatty(STDOUT_FILENO) == 0) return false;
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE")) return true;
  pid_t top = 0;
  for (pid_t pid = getppid(); pid > 1; pid = parent_of(pid)) {
    if (!is_launcher(read_line("/proc/" + std::to_string(pid) + "/comm"))) break;
    top = pid;
  }
  if (top == 0) return false;
  char target[256] = {};
  const std::string fd1 = "/proc/" + std::to_string(top) + "/fd/1";
  if (readlink(fd1.c_str(), target, sizeof target - 1) <= 0) return false;
  const std::string t = target;
  return t.starts_with("/dev/pts/") || t.starts_with("/dev/tty");
}

Report::Report(std::string json_path, bool progress_bar)
    : json_path_(std::move(json_path)), bar_(progress_bar) {
  if (!json_path_.empty()) write_json();  // fail before training, not after it
  if (bar_) erase_bar_on_interrupt();
}

void Report::progress(int epoch, std::size_t step, std::size_t steps) {
  if (!bar_ || steps == 0) return;
  constexpr int kWidth = 40;
  const int filled = static_cast<int>(step * kWidth / steps);
  if (filled == last_width_ && step != steps) return;  // redraw only when the bar moves
  last_width_ = filled;
  bar_drawn = 1;
  std::printf("\repoch %3d [%s%s] %zu/%zu", epoch,
              std::string(static_cast<std::size_t>(filled), '=').c_str(),
              std::string(static_cast<std::size_t>(kWidth - filled), ' ').c_str(), step, steps);
  std::fflush(stdout);
}

void Report::clear_progress() {
  if (bar_ && last_width_ >= 0) {
    std::printf("%s", kEraseLine);
    std::fflush(stdout);
  }
  bar_drawn = 0;
  last_width_ = -1;
}

void Report::epoch(const EpochRecord& rec) {
  clear_progress();
  std::printf("epoch %3d  train_loss %.4f  train_acc %.4f  test_acc %.4f  %7.2f s  %8.0f img/s\n",
              rec.epoch, rec.train_loss, rec.train_accuracy, rec.test_accuracy, rec.seconds,
              rec.images_per_s);
  std::fflush(stdout);
  records_.push_back(rec);
  if (!json_path_.empty()) write_json();
}

void Report::write_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const EpochRecord& r : records_) {
    out.push_back({{"epoch", r.epoch},
                   {"train_loss", r.train_loss},
                   {"train_accuracy", r.train_accuracy},
                   {"test_accuracy", r.test_accuracy},
                   {"seconds", r.seconds},
                   {"images_per_s", r.images_per_s}});
  }
  std::ofstream f(json_path_, std::ios::trunc);
  f << out.dump(2) << '\n';
  f.flush();
  if (!f) throw std::runtime_error("cannot write --json file " + json_path_);
}

}  // namespace fmnist
