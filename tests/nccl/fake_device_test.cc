// The NCCL backend's bootstrap on a machine without a GPU, under fake_cuda_device.cc (LD_PRELOAD):
// every rank "sees" one device at the same PCI address. Two ranks on one host must be refused
// naming both, and a rank's own device error must reach the other ranks (Remote) instead of
// leaving them waiting in NCCL. Skips unless SYNK_TEST_FAKE_CUDA is set (by ctest).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <synk/synk.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "mpi_test.h"

namespace {

using synk_test::caught;
using synk_test::message;
using ::testing::HasSubstr;

bool faked() {
  const char* v = std::getenv("SYNK_TEST_FAKE_CUDA");
  return v && *v == '1';
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

TEST(NcclFakeDevice, TwoRanksOnOneDeviceAreRefused) {
  if (!faked()) GTEST_SKIP() << "needs the fake CUDA device (SYNK_TEST_FAKE_CUDA=1, LD_PRELOAD)";
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const auto e = caught([] { synk::Communicator c(MPI_COMM_WORLD, synk::CommOptions{"nccl"}); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), synk::ErrorCode::InvalidUsage) << message(e);
  EXPECT_EQ(message(e),
            std::string("synk InvalidUsage: the nccl backend: ranks 0 and 1 both use the CUDA "
                        "device at PCI 0000:00:00.0 on host ") +
                host +
                "; NCCL needs one device per rank (start the ranks with synkrun, or give each "
                "its own device with SYNK_GPU or CUDA_VISIBLE_DEVICES)");
}

// Run with SYNK_GPU=7 on rank 0 only: rank 0 fails locally, the others hear of it.
TEST(NcclFakeDevice, OneRanksErrorReachesTheOthers) {
  if (!faked()) GTEST_SKIP() << "needs the fake CUDA device (SYNK_TEST_FAKE_CUDA=1, LD_PRELOAD)";
  const char* gpu = std::getenv("SYNK_GPU");
  if (world_rank() == 0 && !(gpu && std::string(gpu) == "7"))
    GTEST_SKIP() << "needs SYNK_GPU=7 on rank 0";
  const auto e = caught([] { synk::Communicator c(MPI_COMM_WORLD, synk::CommOptions{"nccl"}); });
  ASSERT_TRUE(e.has_value());
  const std::string own = "SYNK_GPU='7' selects CUDA device 7 but this rank sees 1 device(s)";
  if (world_rank() == 0) {
    EXPECT_EQ(e->code(), synk::ErrorCode::InvalidArgument) << message(e);
    EXPECT_EQ(message(e), "synk InvalidArgument: " + own);
  } else {
    EXPECT_EQ(e->code(), synk::ErrorCode::Remote) << message(e);
    EXPECT_EQ(message(e),
              "synk Remote: the nccl backend: rank 0 could not set up its CUDA "
              "device: " +
                  own);
  }
}

// Run with SYNK_FAKE_DISTINCT_BUS=1: the ranks get past the device checks and NCCL's init fails
// (no driver); every rank reports it as a Backend error naming the call.
TEST(NcclFakeDevice, InitFailureIsAnErrorOnEveryRank) {
  if (!faked()) GTEST_SKIP() << "needs the fake CUDA device (SYNK_TEST_FAKE_CUDA=1, LD_PRELOAD)";
  // NCCL itself is real: beside a real driver and GPU its init succeeds (seen on an H100).
  if (access("/dev/nvidiactl", F_OK) == 0)
    GTEST_SKIP() << "an NVIDIA driver is here (/dev/nvidiactl): NCCL's init cannot fail as staged";
  const auto e = caught([] { synk::Communicator c(MPI_COMM_WORLD, synk::CommOptions{"nccl"}); });
  ASSERT_TRUE(e.has_value()) << "NCCL's init succeeded without a CUDA driver";
  const int r = world_rank(), n = world_size();
  EXPECT_EQ(e->code(), synk::ErrorCode::Backend) << message(e);
  EXPECT_THAT(message(e), HasSubstr("the nccl backend: rank " + std::to_string(r) +
                                    ": ncclCommInitRankConfig (rank " + std::to_string(r) +
                                    " of " + std::to_string(n) + ") failed: "));
}

}  // namespace
