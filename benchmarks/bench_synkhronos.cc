// The Synkhronos model's costs, beside raw MPI in the same run: the per-call time of a Function
// with an empty body and one scalar avg output (SPMD and master-driven) against an 8-byte
// MPI_Allreduce, and one batch of 256 random rows of 784 floats out of a 60000-row Data against
// memcpy of the same bytes. Run: build/bin/synkrun -np 2 build/bin/synk-bench-synkhronos
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "bench_cli.h"
#include "bench_median.h"

#include "synk/synk.h"

namespace {

using Clock = std::chrono::steady_clock;
using synk::bench::median;

// Median over rounds of the mean time per call of fn, the slowest rank's.
template <class Fn>
double time_us(int calls, int rounds, Fn&& fn) {
  std::vector<double> per_round;
  for (int r = 0; r < rounds; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) fn();
    double t = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    per_round.push_back(t);
  }
  return median(per_round);
}

constexpr int kCalls = 2000, kRounds = 7;

// Microseconds per call: an 8-byte MPI_Allreduce, an empty Function call SPMD and the same
// call master-driven (0 off the master).
struct CallCosts {
  double raw_us = 0, spmd_us = 0, driven_us = 0;
};

CallCosts time_calls(synk::Communicator& comm) {
  synk::Data<float> none(comm, {1, 1});
  synk::Function<float> empty(comm, "empty", {synk::Collect::avg},
                              [](const synk::SliceInputs<float>&) {
                                return synk::Function<float>::Outputs{{1.0f}};
                              });
  double x = 1.0, y = 0.0;
  auto raw = [&] { MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, comm.mpi_comm()); };
  auto spmd = [&] { empty({&none}); };
  for (int i = 0; i < 200; ++i) {
    raw();
    spmd();
  }
  CallCosts costs;
  std::vector<double> r1, r2;
  for (int r = 0; r < kRounds; ++r) {  // interleaved rounds, so both see the same machine
    r1.push_back(time_us(kCalls, 1, raw));
    r2.push_back(time_us(kCalls, 1, spmd));
  }
  costs.raw_us = median(r1);
  costs.spmd_us = median(r2);

  // Master-driven: the same call, issued by the master, served by the workers.
  synk::Distributed dist(comm);
  dist.add(empty);
  dist.add("none", none);
  if (dist.serve()) {
    for (int i = 0; i < 200; ++i) dist.call(empty, {"none"});
    std::vector<double> r3;
    for (int r = 0; r < kRounds; ++r) {
      const auto t0 = Clock::now();
      for (int i = 0; i < kCalls; ++i) dist.call(empty, {"none"});
      r3.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kCalls);
    }
    costs.driven_us = median(r3);
    dist.close();
  }
  return costs;
}

constexpr std::size_t kRows = 60000, kCols = 784, kBatch = 256;

// Data::take of a batch against memcpy of as many bytes: medians in microseconds, the bytes of
// this rank's share, and the first pass over the Data's pages (the slowest rank's ms).
struct TakeCosts {
  double take_us = 0, copy_us = 0, first_pass_ms = 0;
  std::size_t bytes_taken = 0;
};

TakeCosts time_take(synk::Communicator& comm) {
  // Batch gather: 256 random rows of 784 floats out of 60000, this rank's share of them.
  synk::Data<float> images(comm, {kRows, kCols});
  images.load([&](float* p) {
    for (std::size_t i = 0; i < kRows * kCols; ++i) p[i] = static_cast<float>(i % 251);
  });
  // A training loop's batches reach every row within an epoch, so after the first each rank
  // has every page of the Data mapped; the first touch of a page costs a fault (far more under
  // a hypervisor that shadows page tables), which is the kernel's time, not take()'s. One pass
  // reading a byte of each page stands in for that first epoch; its time is printed apart.
  TakeCosts costs;
  const auto w0 = Clock::now();
  const auto* bytes = reinterpret_cast<const volatile unsigned char*>(images.data());
  for (std::size_t off = 0; off < kRows * kCols * sizeof(float); off += 4096) (void)bytes[off];
  costs.first_pass_ms = std::chrono::duration<double, std::milli>(Clock::now() - w0).count();
  MPI_Allreduce(MPI_IN_PLACE, &costs.first_pass_ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  std::mt19937 rng(7);
  std::vector<std::size_t> idx(kBatch);
  std::vector<double> take_us, copy_us;
  std::vector<float> dst(kBatch * kCols);
  std::vector<float> reuse;  // the training loop's batch buffer, reused from step to step
  for (int r = 0; r < 50; ++r) {
    for (auto& i : idx) i = rng() % kRows;
    // The baseline reads the same number of bytes of the same Data, from a block drawn apart
    // from the batch: were it to start at a batch row (as it once did, at idx[0], which this
    // rank had just copied), part of it would be hot in cache and the ratio unfair to take().
    // Both start equally cold: a fresh random place in 188 MB, every round.
    const std::size_t block = rng() % (kRows - kBatch);
    const auto t0 = Clock::now();
    const auto sel = synk::Batch::indices(idx).for_rank(kRows, comm.rank(), comm.size());
    const auto mine = images.take(sel, reuse);
    const auto t1 = Clock::now();
    costs.bytes_taken = mine.size() * sizeof(float);
    std::memcpy(dst.data(), images.data() + block * kCols, costs.bytes_taken);
    const auto t2 = Clock::now();
    take_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    copy_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
  }
  costs.take_us = median(take_us);
  costs.copy_us = median(copy_us);
  return costs;
}

void print_table(const synk::Communicator& comm, const CallCosts& c, const TakeCosts& t) {
  std::printf("# synk %s, %d ranks, backend %s\n", SYNK_VERSION_STRING, comm.size(),
              comm.backend().c_str());
  std::printf("%-46s %10s %10s %8s %6s\n", "# what", "synk(us)", "mpi(us)", "synk/mpi", "goal");
  std::printf("%-46s %10.2f %10.2f %8.2f %6s\n", "Function call, empty body, 1 avg output (SPMD)",
              c.spmd_us, c.raw_us, c.spmd_us / c.raw_us, "<= 1.5");
  std::printf("%-46s %10.2f %10.2f %8.2f %6s\n", "the same, master-driven", c.driven_us, c.raw_us,
              c.driven_us / c.raw_us, "<= 3");
  std::printf("# batch of %zu random rows x %zu floats from %zu rows (rank 0's share: %zu bytes)\n",
              kBatch, kCols, kRows, t.bytes_taken);
  // Its own columns: the baseline is memcpy, and the ratio a speed (higher is better).
  std::printf("%-46s %10s %10s %8s %6s\n", "# what", "take(us)", "memcpy(us)", "speed", "goal");
  std::printf("%-46s %10.2f %10.2f %8.2f %6s\n", "take(Batch::indices); speed: memcpy/take",
              t.take_us, t.copy_us, t.copy_us / t.take_us, ">= .8");
  std::printf("%-46s %10.2f %10.2f\n", "  as GB/s", t.bytes_taken / t.take_us / 1e3,
              t.bytes_taken / t.copy_us / 1e3);
  std::printf("# before: a first pass over the Data's pages took %.1f ms (the slowest rank)\n",
              t.first_pass_ms);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The Synkhronos model's costs beside raw MPI in the same run: an empty Function "
               "call (SPMD and master-driven) against an 8-byte MPI_Allreduce, and Data::take of "
               "256 random rows against memcpy. It takes no options. "
               "Run: synkrun -np 2 synk-bench-synkhronos",
               "synk-bench-synkhronos"};
  if (const int code = synk::bench::parse_arguments(app, argc, argv); code >= 0) return code;
  synk::Communicator comm;
  const CallCosts calls = time_calls(comm);
  const TakeCosts take = time_take(comm);
  if (comm.rank() == 0) print_table(comm, calls, take);
  return 0;
}
