// The NCCL backend's device rules without a GPU: which device a rank takes from SYNK_GPU,
// CUDA_VISIBLE_DEVICES and its local rank, and the detection of two ranks on one device.
#include "backends/nccl/device_choice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "synk/error.h"

namespace synk::detail {
namespace {

TEST(DeviceChoice, LocalRankModuloDeviceCountWithoutSynkGpu) {
  EXPECT_EQ(pick_device("", nullptr, 0, 4), 0);
  EXPECT_EQ(pick_device("", nullptr, 3, 4), 3);
  EXPECT_EQ(pick_device("", nullptr, 5, 4), 1);
  EXPECT_EQ(pick_device("", "4,5", 5, 2), 1);
}

TEST(DeviceChoice, SynkGpuWithVisibleDevicesIsDeviceZero) {
  // synkrun sets CUDA_VISIBLE_DEVICES to the rank's GPU: it is device 0 whatever its index.
  EXPECT_EQ(pick_device("3", "3", 1, 1), 0);
  EXPECT_EQ(pick_device("2,3", "2,3", 0, 2), 0);
  // A list the GPU is not in (UUIDs, another set): its device 0, as before.
  EXPECT_EQ(pick_device("3", "GPU-8d1f0e3a", 0, 1), 0);
}

// A batch system's CUDA_VISIBLE_DEVICES=0,1,2,3 for every task, and SYNK_GPU per rank, as the
// shared-device error advises: SYNK_GPU=2 is device 2 of that list (it was device 0 on every
// rank, and the job was refused again with the same advice).
TEST(DeviceChoice, SynkGpuIsFoundInAVisibleList) {
  EXPECT_EQ(pick_device("2", "0,1,2,3", 0, 4), 2);
  EXPECT_EQ(pick_device("6", "4,5,6,7", 0, 4), 2);
  EXPECT_EQ(pick_device("3,0", "0, 1, 2, 3", 0, 4), 3);
}

TEST(DeviceChoice, SynkGpuAloneNamesTheDevice) {
  EXPECT_EQ(pick_device("3", nullptr, 0, 4), 3);
  EXPECT_EQ(pick_device("2,3", nullptr, 0, 4), 2);  // the first of a list
}

void expect_invalid(const std::string& gpu, const char* visible, int count,
                    const std::string& message) {
  try {
    pick_device(gpu, visible, 0, count);
    ADD_FAILURE() << "SYNK_GPU='" << gpu << "' was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_EQ(std::string(e.what()), "synk InvalidArgument: " + message);
  }
}

TEST(DeviceChoice, RejectsMalformedSynkGpu) {
  for (const char* gpu : {"x", "-1", "+1", "1x", ",1", "99999999999"}) {
    expect_invalid(gpu, nullptr, 4,
                   std::string("SYNK_GPU='") + gpu +
                       "' is not valid: expected a GPU index or a comma-separated list of them");
  }
}

TEST(DeviceChoice, RejectsADeviceThatIsNotVisible) {
  expect_invalid("4", nullptr, 4,
                 "SYNK_GPU='4' selects CUDA device 4 but this rank sees 4 device(s)");
}

TEST(DeviceChoice, DistinctDevicesAreFine) {
  EXPECT_FALSE(find_shared_device({}).has_value());
  EXPECT_FALSE(
      find_shared_device({{"a", "0000:3b:00.0"}, {"a", "0000:5e:00.0"}, {"b", "0000:3b:00.0"}})
          .has_value());
}

TEST(DeviceChoice, FindsTheFirstTwoRanksOnOneDevice) {
  const std::vector<RankDevice> ranks = {{"a", "0000:3b:00.0"},
                                         {"b", "0000:3b:00.0"},
                                         {"a", "0000:5e:00.0"},
                                         {"b", "0000:3b:00.0"},
                                         {"a", "0000:5e:00.0"}};
  const auto pair = find_shared_device(ranks);
  ASSERT_TRUE(pair.has_value());
  EXPECT_EQ(pair->first, 1);
  EXPECT_EQ(pair->second, 3);
}

}  // namespace
}  // namespace synk::detail
