// SYNK_BACKEND=auto where every rank sees its own GPU: one communicator takes calls on device
// buffers through NCCL and calls on host buffers through the host backend (shm on one node), as
// Horovod does with GPU and CPU tensors. Skips where no device is visible; ctest runs it here
// under the fake CUDA device and fake NCCL, whose call counter shows which way each call went.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <synk/synk.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "mpi_test.h"
#include "nccl_test_comm.h"

namespace {

using synk::DataType;
using synk::ReduceOp;
using synk::testing::fake_nccl_calls;
using ::testing::Each;
using ::testing::HasSubstr;

std::optional<std::string> no_device() {
  try {
    synk::device_count();
    return std::nullopt;
  } catch (const synk::Error& e) {
    return std::string("no CUDA device visible: ") + e.what();
  }
}

class NcclAuto : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto why = no_device()) GTEST_SKIP() << *why;
  }
};

// n floats of `value` on the communicator's device.
synk::DeviceBuffer on_device(const synk::Communicator& comm, std::size_t n, float value) {
  const std::vector<float> host(n, value);
  synk::DeviceBuffer d(n * sizeof(float), comm.device());
  d.copy_from_host(host.data(), d.bytes());
  return d;
}

std::vector<float> to_host(const synk::DeviceBuffer& d) {
  std::vector<float> host(d.bytes() / sizeof(float));
  d.copy_to_host(host.data(), d.bytes());
  return host;
}

TEST_F(NcclAuto, DeviceBuffersGoThroughNcclAndHostBuffersThroughTheHostBackend) {
  synk::Communicator comm(MPI_COMM_WORLD, synk::CommOptions{"auto"});
  EXPECT_EQ(comm.backend(), comm.num_nodes() == 1 ? "shm" : "hier");
  ASSERT_GE(comm.device(), 0) << "auto with a device per rank runs NCCL too";
  const int n = comm.size(), me = comm.rank();
  const float sum = static_cast<float>(n * (n + 1) / 2);
  const bool counted = fake_nccl_calls() >= 0 && n > 1;  // one rank's calls may be copies

  std::vector<float> host(5, static_cast<float>(me + 1));
  long before = fake_nccl_calls();
  comm.all_reduce(std::span<float>(host));
  EXPECT_THAT(host, Each(sum));
  if (counted) {
    EXPECT_EQ(fake_nccl_calls(), before) << "a host all_reduce went through NCCL";
  }

  synk::DeviceBuffer dev = on_device(comm, 5, static_cast<float>(me + 1));
  before = fake_nccl_calls();
  comm.all_reduce(dev.data(), dev.data(), 5, DataType::float32, ReduceOp::sum);
  EXPECT_THAT(to_host(dev), Each(sum));
  if (counted) {
    EXPECT_GT(fake_nccl_calls(), before) << "a device all_reduce missed NCCL";
  }

  // Routed by the buffers each rank passes: a broadcast's one buffer; a gather's non-roots pass
  // no recv.
  synk::DeviceBuffer b = on_device(comm, 3, me == 0 ? 7.0f : 0.0f);
  before = fake_nccl_calls();
  comm.broadcast(b.data(), 3, DataType::float32, 0);
  EXPECT_THAT(to_host(b), Each(7.0f));
  synk::DeviceBuffer mine = on_device(comm, 2, static_cast<float>(me));
  synk::DeviceBuffer all = on_device(comm, me == 0 ? 2 * static_cast<std::size_t>(n) : 0, -1.0f);
  comm.gather(mine.data(), me == 0 ? all.data() : nullptr, 2, DataType::float32, 0);
  if (me == 0) {
    std::vector<float> want;
    for (int r = 0; r < n; ++r) want.insert(want.end(), 2, static_cast<float>(r));
    EXPECT_EQ(to_host(all), want);
  }
  if (counted) {
    EXPECT_GE(fake_nccl_calls(), before + 2) << "a device broadcast or gather missed NCCL";
  }
}

// A DeviceShared needs a communicator that runs NCCL: an auto one does, on a GPU node.
TEST_F(NcclAuto, DeviceSharedTakesAnAutoCommunicator) {
  synk::Communicator comm(MPI_COMM_WORLD, synk::CommOptions{"auto"});
  synk::DeviceShared<float> w(comm, "w", std::vector<float>(4, static_cast<float>(comm.rank())));
  EXPECT_EQ(w.device(), comm.device());
  w.all_reduce(ReduceOp::sum);
  const int n = comm.size();
  EXPECT_THAT(w.to_host(), Each(static_cast<float>(n * (n - 1) / 2)));
}

// One rank passes host buffers where the others pass device ones: they would wait in different
// backends until SYNK_TIMEOUT. Under SYNK_CHECK_CALLS (its own ctest entry) every rank fails the
// call naming both, and the next call works.
TEST_F(NcclAuto, RanksThatDisagreeOnDeviceOrHostFailEverywhereUnderCheckCalls) {
  const char* checks = std::getenv("SYNK_CHECK_CALLS");
  if (checks == nullptr || std::string(checks) != "1") {
    GTEST_SKIP() << "runs under SYNK_CHECK_CALLS=1 (nccl_auto_routing_fake_checked_np2)";
  }
  synk::Communicator comm(MPI_COMM_WORLD, synk::CommOptions{"auto"});
  if (comm.size() < 2) GTEST_SKIP() << "needs a rank that differs";
  const int odd = comm.size() - 1;
  synk::DeviceBuffer dev = on_device(comm, 4, 1.0f);
  std::vector<float> host(4, 1.0f);
  void* p = comm.rank() == odd ? static_cast<void*>(host.data()) : dev.data();
  const auto e =
      synk_test::caught([&] { comm.all_reduce(p, p, 4, DataType::float32, ReduceOp::sum); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), synk::ErrorCode::InvalidUsage);
  EXPECT_THAT(e->what(), HasSubstr("mismatched calls: rank 0 called all_reduce(count 4, float32, "
                                   "sum) on device buffers, rank " +
                                   std::to_string(odd) +
                                   " called all_reduce(count 4, float32, sum)"));
  comm.all_reduce(dev.data(), dev.data(), 4, DataType::float32, ReduceOp::sum);
  EXPECT_THAT(to_host(dev), Each(static_cast<float>(comm.size())));
}

}  // namespace
