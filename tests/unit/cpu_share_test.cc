// cpu_share.h: whether the ranks of a node each have a CPU of their own (which decides whether
// a waiting rank polls or yields), from their affinity masks and the cgroup's CPU limit.
#include "backends/shm/cpu_share.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "temp_tree.h"

namespace synk::shm {
namespace {

cpu_set_t cpus(std::initializer_list<int> list) {
  cpu_set_t m;
  CPU_ZERO(&m);
  for (int c : list) CPU_SET(c, &m);
  return m;
}

bool fits(std::initializer_list<cpu_set_t> masks) {
  const std::vector<cpu_set_t> v(masks);
  return each_rank_has_a_cpu(v);
}

TEST(CpuShare, RanksBoundToCoresOfTheirOwnEachHaveOne) {
  EXPECT_TRUE(fits({cpus({0}), cpus({1})}));
  EXPECT_TRUE(fits({cpus({0, 1}), cpus({0, 1})}));
  EXPECT_TRUE(fits({cpus({0, 1}), cpus({0, 1}), cpus({2})}));
  EXPECT_TRUE(fits({}));
  EXPECT_TRUE(fits({cpus({1023})}));
}

TEST(CpuShare, MoreRanksThanTheirCpusShare) {
  EXPECT_FALSE(fits({cpus({0}), cpus({0})}));  // two ranks bound to one core of a big machine
  EXPECT_FALSE(fits({cpus({0, 1}), cpus({0, 1}), cpus({0, 1}), cpus({0, 1})}));  // 4 on 2
  EXPECT_FALSE(fits({cpus({0}), cpus({0}), cpus({1, 2})}));  // enough CPUs in all, not for 0, 1
  EXPECT_FALSE(fits({cpus({})}));
}

// The first rank's first choice must move for the others to fit: only an augmenting path finds
// it (greedy in order takes CPU 0 for rank 0, and rank 1 has nothing left).
TEST(CpuShare, AMatchingThatNeedsAnEarlierRankToMoveIsFound) {
  EXPECT_TRUE(fits({cpus({0, 1}), cpus({0})}));
  EXPECT_TRUE(fits({cpus({0, 1, 2}), cpus({0, 1}), cpus({0})}));
  EXPECT_FALSE(fits({cpus({0, 1, 2}), cpus({0, 1}), cpus({0}), cpus({1})}));
}

TEST(CpuShare, CpuMaxTextIsALimitOrNone) {
  EXPECT_DOUBLE_EQ(cpu_max_limit("150000 100000\n"), 1.5);
  EXPECT_DOUBLE_EQ(cpu_max_limit("100000 100000"), 1.0);
  EXPECT_DOUBLE_EQ(cpu_max_limit("max 100000\n"), 0.0);
  EXPECT_DOUBLE_EQ(cpu_max_limit("-1 100000"), 0.0);  // cgroup v1's "no quota"
  EXPECT_DOUBLE_EQ(cpu_max_limit(""), 0.0);
  EXPECT_DOUBLE_EQ(cpu_max_limit("garbage"), 0.0);
  EXPECT_DOUBLE_EQ(cpu_max_limit("50000 0"), 0.0);
}

class CgroupTree : public synk::testing::TempTree {};

// The tightest limit on the way up from the process's own group applies.
TEST_F(CgroupTree, TheTightestLimitFromTheGroupUpToTheRootApplies) {
  write("/kubepods/pod1/ctr/cpu.max", "max 100000\n");
  write("/kubepods/pod1/cpu.max", "100000 100000\n");
  write("/kubepods/cpu.max", "400000 100000\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("0::/kubepods/pod1/ctr\n", root_), 1.0);
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("0::/kubepods\n", root_), 4.0);
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("0::/other\n", root_), 0.0);
}

TEST_F(CgroupTree, AContainersOwnGroupAtTheRootCounts) {
  write("/cpu.max", "200000 100000\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("0::/\n", root_), 2.0);
}

TEST_F(CgroupTree, CgroupV1QuotaIsReadWhereTheCpuControllerIsOnV1) {
  write("/cpu/cpu.cfs_quota_us", "50000\n");
  write("/cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("12:cpu,cpuacct:/docker/abc\n", root_), 0.5);
  // Hybrid (this machine's layout): v1 controllers beside an empty v2 hierarchy.
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("4:memory:/x\n1:cpu:/\n0::/\n", root_), 0.5);
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("4:memory:/x\n2:cpuacct:/\n0::/\n", root_), 0.0);
  // A batch system's quota on the job's own group, below an unlimited top.
  write("/cpu/batch/job1/cpu.cfs_quota_us", "150000\n");
  write("/cpu/batch/job1/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("12:cpu,cpuacct:/batch/job1\n", root_), 0.5);  // top's 0.5
  write("/cpu/cpu.cfs_quota_us", "-1\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("12:cpu,cpuacct:/batch/job1\n", root_), 1.5);
  write("/cpu,cpuacct/batch/cpu.cfs_quota_us", "120000\n");
  write("/cpu,cpuacct/batch/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("12:cpu,cpuacct:/batch/job1\n", root_), 1.2);
  EXPECT_DOUBLE_EQ(cgroup_cpu_limit("12:cpu,cpuacct:/docker/abc\n", root_), 0.0);
}

}  // namespace
}  // namespace synk::shm
