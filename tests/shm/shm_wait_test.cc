// How a waiting rank waits (cpu_share.h): it polls for GroupConfig::spin_us where every rank has
// a CPU of its own, and yields after a few polls where ranks share CPUs. Each rank publishes its
// affinity mask when its Group is made; these tests pin the ranks (fork_harness.h) and check
// what every rank decided, and that ranks sharing one CPU still run every call exactly.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/shm/cpu_share.h"
#include "fork_harness.h"

namespace synk::shm::testing {
namespace {

// The first `n` CPUs this process may run on (fewer if it has fewer).
std::vector<int> usable_cpus(int n) {
  cpu_set_t m;
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof m, &m) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE && static_cast<int>(out.size()) < n; ++c)
    if (CPU_ISSET(c, &m)) out.push_back(c);
  return out;
}

// Whether `ranks` ranks can be given a CPU each by every measure the group uses (the
// CPUs online and the cgroup's CPU limit, beside the affinity masks the tests set).
bool room_for(int ranks) {
  const double limit = cgroup_cpu_limit();
  return sysconf(_SC_NPROCESSORS_ONLN) >= ranks && (limit == 0 || limit >= ranks);
}

// After a barrier every rank has published its CPUs; each reports what it decided.
RankBody report_decision() {
  return [](Group& g, auto report) {
    g.barrier();
    report(g.polls_before_yielding() ? "polls" : "yields");
    return 0;
  };
}

// Two ranks, each pinned to a CPU of its own (skipped where this process has fewer, or, with
// `need_room`, where room_for(2) fails), must each decide `want`: "polls" or "yields".
void expect_decision(HarnessOptions opt, bool need_room, const std::string& want) {
  const std::vector<int> cpus = usable_cpus(2);
  if (cpus.size() < 2) GTEST_SKIP() << "this process may run on one CPU only";
  if (need_room && !room_for(2))
    GTEST_SKIP() << "fewer than 2 CPUs online or by the cgroup's CPU limit";
  opt.pin_cpus = cpus;
  const auto out = run_ranks(2, opt, report_decision());
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].exit_code, 0) << out[r].message;
    EXPECT_EQ(out[r].message, want) << "rank " << r;
  }
}

class ShmWait : public NoSegmentLeft<> {};

TEST_F(ShmWait, RanksOnCpusOfTheirOwnPollBeforeYielding) {
  expect_decision({}, /*need_room=*/true, "polls");
}

TEST_F(ShmWait, SpinUsZeroMeansYieldingAfterAFewPollsEvenWithCpusOfTheirOwn) {
  HarnessOptions opt;
  opt.spin_us = 0;
  expect_decision(opt, /*need_room=*/false, "yields");
}

// Other groups' ranks on the machine (SYNK_SIMULATE_NODES splits one machine into several
// groups) compete for its CPUs too: with more of them than CPUs online, a group whose own ranks
// have a CPU each still yields.
TEST_F(ShmWait, RanksOfOtherGroupsOnTheMachineCountToo) {
  HarnessOptions opt;
  opt.machine_ranks = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) + 1;
  expect_decision(opt, /*need_room=*/true, "yields");
}

// Two ranks bound to one CPU share it, however many the machine has: neither may poll while
// the other needs that CPU. Calls of every kind, small (the entries) and large (the slots), must
// stay exact.
TEST_F(ShmWait, TwoRanksPinnedToOneCpuYieldAndStayExact) {
  const std::vector<int> cpus = usable_cpus(1);
  ASSERT_EQ(cpus.size(), 1u);
  HarnessOptions opt;
  opt.pin_cpus = {cpus[0], cpus[0]};
  opt.slot_bytes = 4096;  // many steps per large call
  const auto out = run_ranks(2, opt, [](Group& g, auto report) {
    g.barrier();
    if (g.polls_before_yielding()) {
      report("polls although it shares its CPU");
      return 1;
    }
    for (int it = 0; it < 300; ++it) {
      const std::size_t count = it % 3 == 0 ? 5000 : static_cast<std::size_t>(1 + it % 40);
      std::vector<std::int64_t> v(count, it + g.rank()), sum(count, -1);
      all_reduce(g, v.data(), sum.data(), count, DataType::int64, ReduceOp::sum);
      std::vector<std::int64_t> b(count, g.rank() == it % 2 ? it : -1);
      broadcast(g, b.data(), count, DataType::int64, it % 2);
      for (std::size_t i = 0; i < count; ++i) {
        if (sum[i] != 2 * it + 1 || b[i] != it) {
          report("wrong at iteration " + std::to_string(it));
          return 2;
        }
      }
    }
    return 0;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
}

}  // namespace
}  // namespace synk::shm::testing
