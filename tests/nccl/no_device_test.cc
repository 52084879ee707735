// SYNK_BACKEND=nccl where it cannot run: without a visible CUDA device (this CI machine) the
// Communicator fails on every rank with NotSupported and CUDA's own reason, and nothing hangs;
// in a build without NCCL it says so. Skips where a device is visible.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <synk/synk.h>

#include <optional>
#include <string>

#include "mpi_test.h"

#if SYNK_BUILT_WITH_NCCL
#include <cuda_runtime_api.h>
#endif

namespace {

using synk_test::caught;
using synk_test::message;
using ::testing::HasSubstr;

#if SYNK_BUILT_WITH_NCCL

// The text the backend must quote, or nothing when a device is visible.
std::optional<std::string> no_device_text() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    return std::string(cudaGetErrorString(rc));
  }
  if (count == 0) return std::string("found 0 devices");
  return std::nullopt;
}

TEST(NcclNoDevice, CommunicatorFailsWithNotSupportedAndCudasReason) {
  const std::optional<std::string> text = no_device_text();
  if (!text) GTEST_SKIP() << "a CUDA device is visible: this test is for machines without one";
  const auto e = caught([] { synk::Communicator comm(MPI_COMM_WORLD, synk::CommOptions{"nccl"}); });
  ASSERT_TRUE(e.has_value()) << "the nccl backend was created without a device";
  EXPECT_EQ(e->code(), synk::ErrorCode::NotSupported) << message(e);
  EXPECT_EQ(message(e),
            "synk NotSupported: the nccl backend: no CUDA device is visible "
            "(cudaGetDeviceCount: " +
                *text + ")");
}

TEST(NcclNoDevice, FailureLeavesMpiAndOtherBackendsUsable) {
  if (!no_device_text()) GTEST_SKIP() << "a CUDA device is visible";
  EXPECT_TRUE(caught([] { synk::Communicator c(MPI_COMM_WORLD, synk::CommOptions{"nccl"}); }));
  synk::Communicator mpi(MPI_COMM_WORLD, synk::CommOptions{"mpi"});
  EXPECT_TRUE(synk_test::still_usable(mpi));
}

#else

TEST(NcclNoDevice, BuildWithoutNcclSaysSo) {
  const auto e = caught([] { synk::Communicator comm(MPI_COMM_WORLD, synk::CommOptions{"nccl"}); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), synk::ErrorCode::NotSupported);
  EXPECT_EQ(message(e),
            "synk NotSupported: the nccl backend: this build has no NCCL backend (configured with "
            "SYNK_WITH_NCCL=OFF or without CUDA)");
}

#endif

}  // namespace
