// A resource manager's allocation, read from the environment of salloc's (qsub's, bsub's) shell.
#include "allocation.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace synk::launch {
namespace {

Allocation in(const std::map<std::string, std::string>& env) {
  return find_allocation([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(Allocation, NoneOutsideOne) {
  EXPECT_EQ(in({}).manager, "");
  EXPECT_EQ(in({}).nodes, 0);
  EXPECT_EQ(in({{"SLURM_JOB_ID", ""}, {"SLURM_JOB_NUM_NODES", "2"}}).nodes, 0);  // set empty
}

TEST(Allocation, SlurmCountsItsNodes) {
  const Allocation a = in({{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_NUM_NODES", "2"}});
  EXPECT_EQ(a.manager, "Slurm");
  EXPECT_EQ(a.nodes, 2);
  EXPECT_EQ(in({{"SLURM_JOBID", "42"}, {"SLURM_NNODES", "3"}}).nodes, 3);  // older names
  EXPECT_EQ(in({{"SLURM_JOB_ID", "42"}, {"SLURM_NNODES", "x"}}).nodes, 0);  // unreadable
}

TEST(Allocation, PbsCountsTheDistinctHostsOfItsNodeFile) {
  const std::string file = testing::TempDir() + "pbs_nodefile";
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("n1\nn1\nn2\nn2\n", f);  // a line per slot
  std::fclose(f);
  const Allocation a = in({{"PBS_NODEFILE", file}});
  EXPECT_EQ(a.manager, "PBS");
  EXPECT_EQ(a.nodes, 2);
  std::remove(file.c_str());
}

TEST(Allocation, LsfCountsItsHosts) {
  const Allocation a = in({{"LSB_MCPU_HOSTS", "n1 8 n2 8 n3 4"}});
  EXPECT_EQ(a.manager, "LSF");
  EXPECT_EQ(a.nodes, 3);
}

}  // namespace
}  // namespace synk::launch
