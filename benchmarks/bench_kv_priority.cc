// A KeyValue key of top priority pushed while a large key of low priority is being reduced (a
// model's first layer, pushed last in backprop and needed first in the next forward, behind a
// large last layer): how long the top key waits from its push to its result, against the same
// key alone, and what the large key's own time is, against one MPI_Allreduce of it on a
// duplicate of MPI_COMM_WORLD. With SYNK_PARTITION_BYTES (read once per process) the large key
// runs in parts and the top key overtakes it between two; with 0 it waits for the whole key.
// bench_kv_priority.sh runs one process per partition size for one table. Each row is the
// median over STEPS steps (after WARMUP) of the slowest rank's time; every pulled element is
// checked (the exit status is 1 when any is wrong). With --updater both keys have an owner whose
// Updater sets the weights to the reduced sum (reduce to the owner, update, broadcast), so the
// pulled values are checked alike.
// Run: build/bin/synkrun -np 2 build/bin/bench_kv_priority [--large-mib N] [--top-kib N]
//      [--delay-us N] [--steps N] [--warmup N] [--updater] [--no-header]
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "bench_median.h"
#include "synk/key_value.h"
#include "synk/synk.h"

namespace {

using Clock = std::chrono::steady_clock;
using synk::bench::median;

struct Options {
  int large_mib = 64;
  int top_kib = 4;
  int delay_us = 1000;
  int steps = 20;
  int warmup = 3;
  bool updater = false;
  bool no_header = false;
};

// Update on the owner that makes the weights the reduced sum: the pull checks stay exact.
class SetToSum : public synk::Updater {
 public:
  void update(int key, synk::KeyArray grad, synk::KeyArray weights) override {
    (void)key;
    std::memcpy(weights.data, grad.data, grad.count * synk::size_of(grad.dtype));
  }
};

constexpr int kLargeKey = 0;
constexpr int kTopKey = 1;

struct Arrays {
  std::vector<float> large_in, large_out, top_in, top_out;
};

// Per step, the slowest rank's times (us) of each measure.
struct Times {
  std::vector<double> top_wait, top_alone, large, mpi_large;
};

// Small integers, exact in float in any order of the sum.
float input_value(int rank, int step) { return static_cast<float>(rank + 1 + step % 13); }

void fill(Arrays& a, int rank, int step) {
  std::fill(a.large_in.begin(), a.large_in.end(), input_value(rank, step));
  std::fill(a.top_in.begin(), a.top_in.end(), input_value(rank, step + 1));
  std::fill(a.large_out.begin(), a.large_out.end(), -1.0f);
  std::fill(a.top_out.begin(), a.top_out.end(), -1.0f);
}

std::int64_t count_wrong(const std::vector<float>& out, int ranks, int step) {
  float want = 0;
  for (int r = 0; r < ranks; ++r) want += input_value(r, step);
  return std::count_if(out.begin(), out.end(), [&](float v) { return v != want; });
}

double slowest(MPI_Comm mpi, Clock::time_point from, Clock::time_point to) {
  double us = std::chrono::duration<double, std::micro>(to - from).count();
  MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, mpi);
  return us;
}

// One step: the large key pushed, the top key pushed delay_us later; then the top key alone;
// then MPI_Allreduce of the large array. Returns the wrong elements over the ranks.
std::int64_t run_step(synk::KeyValue& kv, Arrays& a, MPI_Comm mpi, const Options& o, int step,
                      Times* times) {
  int rank = 0, ranks = 0;
  MPI_Comm_rank(mpi, &rank);
  MPI_Comm_size(mpi, &ranks);
  fill(a, rank, step);
  MPI_Barrier(mpi);
  const auto t0 = Clock::now();
  kv.pull(kLargeKey, a.large_out.data());
  kv.push(kLargeKey, a.large_in.data(), 0);
  std::this_thread::sleep_until(t0 + std::chrono::microseconds(o.delay_us));
  const auto t1 = Clock::now();
  kv.push(kTopKey, a.top_in.data(), 10);
  kv.pull(kTopKey, a.top_out.data());
  kv.pull_wait(kTopKey);
  const auto t2 = Clock::now();
  kv.pull_wait(kLargeKey);
  const auto t3 = Clock::now();
  std::int64_t wrong = count_wrong(a.large_out, ranks, step) +
                       count_wrong(a.top_out, ranks, step + 1);
  MPI_Barrier(mpi);
  const auto t4 = Clock::now();
  kv.push(kTopKey, a.top_in.data(), 10);
  kv.pull(kTopKey, a.top_out.data());
  kv.pull_wait(kTopKey);
  const auto t5 = Clock::now();
  wrong += count_wrong(a.top_out, ranks, step + 1);
  MPI_Barrier(mpi);
  const auto t6 = Clock::now();
  MPI_Allreduce(a.large_in.data(), a.large_out.data(), static_cast<int>(a.large_in.size()),
                MPI_FLOAT, MPI_SUM, mpi);
  const auto t7 = Clock::now();
  wrong += count_wrong(a.large_out, ranks, step);
  const double top_wait = slowest(mpi, t1, t2), large = slowest(mpi, t0, t3);
  const double top_alone = slowest(mpi, t4, t5), mpi_large = slowest(mpi, t6, t7);
  if (times) {
    times->top_wait.push_back(top_wait);
    times->large.push_back(large);
    times->top_alone.push_back(top_alone);
    times->mpi_large.push_back(mpi_large);
  }
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, mpi);
  return wrong;
}

std::string partition_setting() {
  const char* env = std::getenv("SYNK_PARTITION_BYTES");
  const std::string text = env ? env : "";
  return text.find_first_not_of(" \t") == std::string::npos ? "4194304" : text;
}

void print_row(const Options& o, const Times& t, std::int64_t wrong, int ranks,
               const std::string& backend) {
  if (!o.no_header) {
    std::printf("# bench_kv_priority: %d ranks, backend %s; a %d MiB float32 key (priority 0), "
                "a %d KiB one (priority 10) pushed %d us after it%s; median of %d steps after "
                "%d warmup\n",
                ranks, backend.c_str(), o.large_mib, o.top_kib, o.delay_us,
                o.updater ? ", each updated on its owner" : "", o.steps, o.warmup);
    std::printf("%14s %13s %14s %10s %10s %14s %8s %7s\n", "partition(B)", "top_wait(us)",
                "top_alone(us)", "large(ms)", "GB/s", "mpi_large(ms)", "vs_mpi", "#wrong");
  }
  const double large_ms = median(t.large) / 1e3, mpi_ms = median(t.mpi_large) / 1e3;
  const double gbs = static_cast<double>(o.large_mib) * (1 << 20) / (large_ms * 1e6);
  std::printf("%14s %13.1f %14.1f %10.2f %10.2f %14.2f %7.2fx %7lld\n",
              partition_setting().c_str(), median(t.top_wait), median(t.top_alone), large_ms,
              gbs, mpi_ms, mpi_ms / large_ms, static_cast<long long>(wrong));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"A top-priority KeyValue key pushed while a large low-priority one is reduced",
               "bench_kv_priority"};
  app.add_option("--large-mib", o.large_mib, "the large key's MiB")->check(CLI::Range(1, 1024));
  app.add_option("--top-kib", o.top_kib, "the top key's KiB")->check(CLI::Range(1, 65536));
  app.add_option("--delay-us", o.delay_us, "microseconds from the large push to the top push")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--steps", o.steps, "timed steps")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", o.warmup, "untimed steps first")->check(CLI::Range(0, 100000));
  app.add_flag("--updater", o.updater,
               "an Updater on each key's owner (reduce, update, broadcast) that sets the "
               "weights to the reduced sum");
  app.add_flag("--no-header", o.no_header, "print the row only");
  if (const int code = synk::bench::parse_arguments(app, argc, argv); code >= 0) return code;

  synk::Communicator comm;
  MPI_Comm mpi = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &mpi);
  Arrays a;
  const auto large = static_cast<std::size_t>(o.large_mib) * (1 << 20) / sizeof(float);
  const auto top = static_cast<std::size_t>(o.top_kib) * 1024 / sizeof(float);
  a.large_in.resize(large);
  a.large_out.resize(large);
  a.top_in.resize(top);
  a.top_out.resize(top);
  std::int64_t wrong = 0;
  Times times;
  {
    synk::KeyValue kv(comm, {o.updater ? std::make_shared<SetToSum>() : nullptr});
    if (o.updater) {
      kv.init_key(kLargeKey, std::span<const float>(a.large_out));
      kv.init_key(kTopKey, std::span<const float>(a.top_out));
    } else {
      kv.init_key(kLargeKey, large, synk::DataType::float32);
      kv.init_key(kTopKey, top, synk::DataType::float32);
    }
    for (int s = 0; s < o.warmup + o.steps; ++s) {
      wrong += run_step(kv, a, mpi, o, s, s < o.warmup ? nullptr : &times);
    }
    kv.close();
  }
  if (comm.rank() == 0) print_row(o, times, wrong, comm.size(), comm.backend());
  MPI_Comm_free(&mpi);
  return wrong == 0 ? 0 : 1;
}
