// The list collectives' fusion (synk/shared_list.h): N Shared<float> of M elements all-reduced
// (avg) as one list, beside the same arrays one Shared::all_reduce at a time; the median over
// rounds of the slowest rank's time per step. Run:
//   build/bin/synkrun -np 2 build/bin/synk-bench-shared-list [arrays=500] [elems=256] [rounds=21]
// SYNK_FUSION_BYTES sets the pack size (default 64 MiB; 0: one call per array).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_median.h"

#include "synk/synk.h"

namespace {

using Clock = std::chrono::steady_clock;
using synk::bench::median;

// The slowest rank's time of one fn(), in microseconds.
template <class Fn>
double time_once_us(MPI_Comm comm, Fn&& fn) {
  MPI_Barrier(comm);
  const auto t0 = Clock::now();
  fn();
  double t = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int arrays = 500, elems = 256, rounds = 21;
  CLI::App app{"A list of Shared<float> all-reduced (avg) as one fused list, beside one "
               "Shared::all_reduce per array. SYNK_FUSION_BYTES sets the pack size.",
               "synk-bench-shared-list"};
  app.add_option("arrays", arrays, "Shared variables in the list")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("elems", elems, "floats per variable")
      ->check(CLI::Range(1, 1 << 26))
      ->capture_default_str();
  app.add_option("rounds", rounds, "timed rounds (the median is printed)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  if (const int code = synk::bench::parse_arguments(app, argc, argv); code >= 0) return code;
  synk::Communicator comm;
  std::deque<synk::Shared<float>> params;
  std::vector<synk::SharedRef> list;
  for (int i = 0; i < arrays; ++i) {
    params.emplace_back(comm, std::to_string(i),
                        std::vector<float>(static_cast<std::size_t>(elems), 1.0f * comm.rank()));
    list.push_back(params.back());
  }
  auto fused = [&] { synk::all_reduce(comm, list); };
  auto each = [&] {
    for (auto& p : params) p.all_reduce();
  };
  for (int i = 0; i < 5; ++i) {  // warm-up
    fused();
    each();
  }
  std::vector<double> t_fused, t_each;
  for (int r = 0; r < rounds; ++r) {  // interleaved, so both see the same machine
    t_fused.push_back(time_once_us(comm.mpi_comm(), fused));
    t_each.push_back(time_once_us(comm.mpi_comm(), each));
  }
  if (comm.rank() == 0) {
    const double f = median(t_fused), e = median(t_each);
    std::printf("%d ranks, backend %s: %d Shared<float> of %d elements (%.1f KiB), avg\n",
                comm.size(), comm.backend().c_str(), arrays, elems,
                arrays * elems * 4.0 / 1024.0);
    std::printf("  as a list (fused):  median %10.1f us per step\n", f);
    std::printf("  one by one:         median %10.1f us per step (%.1fx the list)\n", e, e / f);
  }
}
