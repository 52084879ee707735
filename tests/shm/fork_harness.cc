// See fork_harness.h.
#include "fork_harness.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "backends/shm/segment.h"

namespace synk::shm::testing {

namespace {

struct SharedResult {
  int code;
  char message[1024];
};

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Rank r's process: pins it where options ask, runs body on its own Group over the segment at
// segment_base, and leaves the exit code and message in its entry of the result table.
[[noreturn]] void run_child(int r, const GroupConfig& cfg, void* segment_base,
                            const HarnessOptions& options, const RankBody& body,
                            SharedResult& mine) {
  auto report = [&mine](const std::string& text) {
    std::snprintf(mine.message, sizeof mine.message, "%s", text.c_str());
  };
  int code = 0;
  try {
    if (static_cast<std::size_t>(r) < options.pin_cpus.size()) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(options.pin_cpus[static_cast<std::size_t>(r)], &one);
      if (sched_setaffinity(0, sizeof one, &one) != 0)
        throw std::runtime_error("sched_setaffinity failed");
    }
    GroupConfig c = cfg;
    c.rank = r;
    Group group(segment_base, c);
    code = body(group, report);
  } catch (const std::exception& e) {
    report(std::string("uncaught: ") + e.what());
    code = 99;
  }
  mine.code = code;
  _exit(code);
}

// Forks one child per rank, each running run_child; returns their pids, by rank.
std::vector<pid_t> fork_ranks(int size, const GroupConfig& cfg, void* segment_base,
                              const HarnessOptions& options, const RankBody& body,
                              SharedResult* results) {
  std::vector<pid_t> pids(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    const pid_t pid = fork();
    if (pid == 0) run_child(r, cfg, segment_base, options, body, results[r]);
    pids[static_cast<std::size_t>(r)] = pid;
  }
  return pids;
}

// Waits for every child, killing options.kill_rank when asked and every child past the overall
// deadline; returns each rank's outcome, timed from t0.
std::vector<RankOutcome> reap_ranks(const std::vector<pid_t>& pids, const HarnessOptions& options,
                                    std::chrono::steady_clock::time_point t0,
                                    const SharedResult* results) {
  const int size = static_cast<int>(pids.size());
  std::vector<RankOutcome> out(static_cast<std::size_t>(size));
  int remaining = size;
  bool kill_sent = options.kill_rank < 0;
  while (remaining > 0) {
    int status = 0;
    const pid_t done = waitpid(-1, &status, WNOHANG);  // reap at once: a dead peer must vanish
    if (done > 0) {
      for (int r = 0; r < size; ++r) {
        if (pids[static_cast<std::size_t>(r)] != done) continue;
        RankOutcome& o = out[static_cast<std::size_t>(r)];
        o.seconds = since(t0);
        o.killed = WIFSIGNALED(status);
        o.exit_code = o.killed ? 100 + WTERMSIG(status) : WEXITSTATUS(status);
        o.message = results[r].message;
        --remaining;
      }
      continue;
    }
    const double elapsed = since(t0);
    if (!kill_sent && elapsed * 1000 >= options.kill_after_ms) {
      kill(pids[static_cast<std::size_t>(options.kill_rank)], SIGKILL);
      kill_sent = true;
    }
    if (elapsed > options.overall_deadline_s) {
      for (pid_t p : pids) kill(p, SIGKILL);  // a hang: end it, the outcomes will show it
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return out;
}

}  // namespace

std::vector<RankOutcome> run_ranks(int size, const HarnessOptions& options, const RankBody& body) {
  GroupConfig cfg;
  cfg.size = size;
  cfg.slot_bytes = options.slot_bytes;
  cfg.timeout_s = options.timeout_s;
  cfg.store_mode = options.store_mode;
  cfg.cma_min_bytes = options.cma_min_bytes;
  cfg.forced_algos = options.forced_algos;
  // As shm_backend.cc sets them, so that the tests run the paths a job of `size` ranks runs.
  cfg.root_reduces_bytes = options.root_reduces_bytes.value_or(default_root_reduces_bytes(size));
  cfg.small_bytes = options.one_step_bytes.value_or(default_one_step_bytes(size));
  cfg.spin_us = options.spin_us;
  cfg.machine_ranks = options.machine_ranks;
  // Children inherit the mapping across fork: no descriptor (or name) is needed.
  Segment segment = Segment::create_anonymous(Group::segment_bytes(size, cfg.slot_bytes));
  segment.close_handle();

  const std::size_t table_bytes = sizeof(SharedResult) * static_cast<std::size_t>(size);
  void* table = mmap(nullptr, table_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (table == MAP_FAILED) throw std::runtime_error("mmap of the result table failed");
  auto* results = static_cast<SharedResult*>(table);
  std::memset(results, 0, table_bytes);

  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<pid_t> pids = fork_ranks(size, cfg, segment.data(), options, body, results);
  std::vector<RankOutcome> out = reap_ranks(pids, options, t0, results);
  munmap(table, table_bytes);
  return out;
}

std::vector<std::string> synk_segments() {
  std::vector<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, kSegmentPrefix, std::strlen(kSegmentPrefix)) == 0) {
        names.emplace_back(e->d_name);
      }
    }
    closedir(d);
  }
  return names;
}

namespace {

using detail::Collective;

// The call as Communicator makes it.
detail::CollArgs call(Collective c, const void* send, void* recv, std::size_t count, DataType t,
                      ReduceOp op = ReduceOp::sum, int root = 0,
                      std::span<const std::size_t> recv_counts = {}) {
  detail::CollArgs a;
  a.coll = c;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = t;
  a.op = op;
  a.root = root;
  a.counts = recv_counts;
  return a;
}

}  // namespace

void all_reduce(Group& g, const void* send, void* recv, std::size_t count, DataType t,
                ReduceOp op) {
  g.all_reduce(call(Collective::all_reduce, send, recv, count, t, op));
}

void reduce(Group& g, const void* send, void* recv, std::size_t count, DataType t, ReduceOp op,
            int root) {
  g.reduce(call(Collective::reduce, send, recv, count, t, op, root));
}

void broadcast(Group& g, void* buf, std::size_t count, DataType t, int root) {
  g.broadcast(call(Collective::broadcast, buf, buf, count, t, ReduceOp::sum, root));
}

void all_gather(Group& g, const void* send, void* recv, std::size_t count, DataType t) {
  g.all_gather(call(Collective::all_gather, send, recv, count, t));
}

void gather(Group& g, const void* send, void* recv, std::size_t count, DataType t, int root) {
  g.gather(call(Collective::gather, send, recv, count, t, ReduceOp::sum, root));
}

void gatherv(Group& g, const void* send, std::size_t count, void* recv,
             std::span<const std::size_t> recv_counts, DataType t, int root) {
  g.gatherv(call(Collective::gatherv, send, recv, count, t, ReduceOp::sum, root, recv_counts));
}

void scatter(Group& g, const void* send, void* recv, std::size_t count, DataType t, int root) {
  g.scatter(call(Collective::scatter, send, recv, count, t, ReduceOp::sum, root));
}

void reduce_scatter(Group& g, const void* send, void* recv, std::size_t count, DataType t,
                    ReduceOp op) {
  g.reduce_scatter(call(Collective::reduce_scatter, send, recv, count, t, op));
}

}  // namespace synk::shm::testing
