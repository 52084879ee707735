// A resource manager's allocation, read from the environment of salloc's (qsub's, bsub's) shell.
#include "allocation.h"

#include <gtest/gtest.h>

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

// Inside an srun step (srun -n1 synkrun), mpirun gets the step's nodes, not the job's.
TEST(Allocation, SlurmStepCountsTheStepsNodes) {
  EXPECT_EQ(in({{"SLURM_JOB_ID", "42"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_NODES", "1"},
                {"SLURM_JOB_NUM_NODES", "4"}})
                .nodes,
            1);
  // Outside a step a stale step count is not read.
  EXPECT_EQ(in({{"SLURM_JOB_ID", "42"}, {"SLURM_STEP_NUM_NODES", "1"},
                {"SLURM_JOB_NUM_NODES", "4"}})
                .nodes,
            4);
}

// PBS and LSF: mpirun reads them only where built with their support (Debian's is not).
TEST(Allocation, OnlySlurmIsRead) {
  EXPECT_EQ(in({{"PBS_NODEFILE", "/nonexistent"}}).manager, "");
  EXPECT_EQ(in({{"LSB_MCPU_HOSTS", "n1 8 n2 8"}}).manager, "");
}

}  // namespace
}  // namespace synk::launch
