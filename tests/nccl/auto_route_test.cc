// One communicator for host and device buffers (SYNK_BACKEND=auto, the default): a call on
// device memory goes to NCCL, which starts at the first such call, and host memory stays on shm.
// ctest runs it under the fake CUDA device and fake NCCL (fake_cuda_device.cc, fake_nccl.cc); on
// a GPU machine, with a GPU per rank, it runs for real. Skips where no device is visible.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <synk/synk.h>

#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "mpi_test.h"

namespace {

using synk::DataType;
using synk::ErrorCode;
using synk::ReduceOp;
using synk_test::caught;
using synk_test::message;

// The device a rank's NCCL will choose (its local rank among the visible devices), or -1 with
// the reason the test skips.
int rank_device(const synk::Communicator& comm, std::string& why) {
  try {
    const int n = synk::device_count();
    if (comm.local_size() > n) {
      why = std::to_string(comm.local_size()) + " ranks on a node of " + std::to_string(n) +
            " device(s)";
      return -1;
    }
    return comm.local_rank();
  } catch (const synk::Error& e) {
    why = e.what();
    return -1;
  }
}

#define DEVICE_OR_SKIP(comm, dev)                 \
  std::string why_;                               \
  const int dev = rank_device(comm, why_);        \
  if (dev < 0) GTEST_SKIP() << "no device: " << why_

std::vector<float> read(const synk::DeviceBuffer& b, std::size_t n) {
  std::vector<float> out(n);
  b.copy_to_host(out.data(), n * sizeof(float));
  return out;
}

TEST(AutoRoute, DeviceBuffersGoToNcclAndHostBuffersStayOnShm) {
  synk::Communicator comm(MPI_COMM_WORLD);
  DEVICE_OR_SKIP(comm, dev);
  const int r = comm.rank(), n = comm.size();
  ASSERT_EQ(comm.backend(), "shm");
  std::vector<float> host(5, static_cast<float>(r + 1));
  comm.all_reduce(host, ReduceOp::sum);
  EXPECT_THAT(host, ::testing::Each(n * (n + 1) / 2.0f));
  EXPECT_EQ(comm.device(), -1) << "NCCL started for a call on host memory";

  synk::DeviceBuffer d(5 * sizeof(float), dev);
  const std::vector<float> mine(5, static_cast<float>(r + 1));
  d.copy_from_host(mine.data(), d.bytes());
  comm.all_reduce(d.data(), d.data(), 5, DataType::float32, ReduceOp::sum);
  EXPECT_EQ(comm.device(), dev) << "the device call did not start NCCL on this rank's device";
  EXPECT_THAT(read(d, 5), ::testing::Each(n * (n + 1) / 2.0f));
  EXPECT_EQ(comm.backend(), "shm");  // the host route is still shm

  // Non-blocking, on the device, after a non-blocking call on the host.
  std::vector<float> again(3, 1.0f);
  synk::Request h = comm.iall_reduce(again.data(), again.data(), 3, DataType::float32,
                                     ReduceOp::sum);
  d.copy_from_host(mine.data(), d.bytes());
  synk::Request g = comm.iall_reduce(d.data(), d.data(), 5, DataType::float32, ReduceOp::max);
  h.wait();
  g.wait();
  EXPECT_THAT(again, ::testing::Each(static_cast<float>(n)));
  EXPECT_THAT(read(d, 5), ::testing::Each(static_cast<float>(n)));
}

// A gatherv's ranks that send nothing pass no buffer; they learn the route from the others.
TEST(AutoRoute, GathervRanksThatSendNothingFollowTheOthers) {
  synk::Communicator comm(MPI_COMM_WORLD);
  DEVICE_OR_SKIP(comm, dev);
  const int r = comm.rank(), n = comm.size();
  std::vector<std::size_t> counts(static_cast<std::size_t>(n));
  std::iota(counts.begin(), counts.end(), std::size_t{0});  // rank r sends r elements
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  const std::size_t mine = static_cast<std::size_t>(r);
  synk::DeviceBuffer send(mine * sizeof(float), dev), recv(total * sizeof(float), dev);
  const std::vector<float> values(mine, static_cast<float>(10 * r));
  send.copy_from_host(values.data(), send.bytes());
  comm.gatherv(mine ? send.data() : nullptr, mine, r == 0 ? recv.data() : nullptr, counts,
               DataType::float32, 0);
  if (r == 0) {
    std::vector<float> want;
    for (int k = 0; k < n; ++k) want.insert(want.end(), static_cast<std::size_t>(k), 10.0f * k);
    EXPECT_EQ(read(recv, total), want);
  }
  if (total > 0) {
    EXPECT_EQ(comm.device(), dev);
  }
}

TEST(AutoRoute, ACallOnBothKindsOfMemoryIsRefused) {
  synk::Communicator comm(MPI_COMM_WORLD);
  DEVICE_OR_SKIP(comm, dev);
  synk::DeviceBuffer d(4 * sizeof(float), dev);
  std::vector<float> host(4, 1.0f);
  const auto e = caught([&] {
    comm.all_reduce(d.data(), host.data(), 4, DataType::float32, ReduceOp::sum);
  });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e), ::testing::HasSubstr("send is device memory but recv is host memory"));
  comm.all_reduce(host, ReduceOp::sum);  // still usable
  EXPECT_THAT(host, ::testing::Each(static_cast<float>(comm.size())));
}

// A typed call whose spans do not fit is refused on the route the others' calls on such memory
// take: NCCL for device memory, not shm, whose step the others would never take.
TEST(AutoRoute, ATypedCallRefusedOnDeviceMemoryTakesTheDeviceRoute) {
  synk::Communicator comm(MPI_COMM_WORLD);
  DEVICE_OR_SKIP(comm, dev);
  synk::DeviceBuffer send(5 * sizeof(float), dev), recv(4 * sizeof(float), dev);
  const auto e = caught([&] {
    comm.all_reduce(std::span<const float>(static_cast<const float*>(send.data()), 5),
                    std::span<float>(static_cast<float*>(recv.data()), 4));
  });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e), ::testing::HasSubstr("send has 5 elements but recv has 4"));
  EXPECT_EQ(comm.device(), dev) << "refused on the host route";
  std::vector<float> host(3, 1.0f);
  comm.all_reduce(host, ReduceOp::sum);  // the host route is still in step
  EXPECT_THAT(host, ::testing::Each(static_cast<float>(comm.size())));
}

// A call that moves nothing stays on the host, whatever pointers the ranks pass.
TEST(AutoRoute, NothingToMoveStartsNoNccl) {
  synk::Communicator comm(MPI_COMM_WORLD);
  DEVICE_OR_SKIP(comm, dev);
  synk::DeviceBuffer d(4, dev);
  comm.all_reduce(comm.rank() == 0 ? d.data() : nullptr, comm.rank() == 0 ? d.data() : nullptr,
                  0, DataType::float32, ReduceOp::sum);
  EXPECT_EQ(comm.device(), -1);
}

// DeviceShared on the same communicator as the host calls: its collectives take the device
// route, and NCCL starts at the first of them.
TEST(AutoRoute, DeviceSharedOnAnAutoCommunicator) {
  synk::Communicator comm(MPI_COMM_WORLD);
  DEVICE_OR_SKIP(comm, dev);
  const int r = comm.rank(), n = comm.size();
  synk::DeviceShared<float> w(comm, "w", std::vector<float>(6, static_cast<float>(2 * r)), {2, 3});
  EXPECT_EQ(w.device(), dev);
  w.all_reduce();  // avg: n - 1, exact
  EXPECT_THAT(w.to_host(), ::testing::Each(static_cast<float>(n - 1)));
  EXPECT_EQ(comm.device(), dev);
  synk::DeviceShared<float>::Shape shape;
  const synk::DeviceBuffer all = w.all_gather(0, &shape);
  EXPECT_EQ(shape, (std::vector<std::size_t>{2 * static_cast<std::size_t>(n), 3}));
  EXPECT_THAT(read(all, 6 * static_cast<std::size_t>(n)),
              ::testing::Each(static_cast<float>(n - 1)));
  std::vector<float> host(2, 1.0f);  // and host calls go on as before
  comm.all_reduce(host, ReduceOp::sum);
  EXPECT_THAT(host, ::testing::Each(static_cast<float>(n)));
}

}  // namespace
