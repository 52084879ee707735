// anonymous_segment_limit and cgroup_memory_room (segment_share.h): which segments may be
// anonymous (a memfd has no size limit of its own, so reserving one beyond memory would not
// fail but exhaust the machine).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "backends/shm/segment_share.h"
#include "temp_tree.h"

namespace synk::shm {
namespace {

TEST(SegmentLimit, HalfOfTheAvailableMemoryOrOfTheCgroupsRoom) {
  const std::string meminfo =
      "MemTotal:       24000000 kB\nMemFree:        20000000 kB\nMemAvailable:   1000 kB\n";
  EXPECT_EQ(anonymous_segment_limit(meminfo, UINT64_MAX), 512000u);
  EXPECT_EQ(anonymous_segment_limit(meminfo, 100000), 50000u);
  EXPECT_EQ(anonymous_segment_limit(meminfo, 0), 0u);
  // No MemAvailable line (or no /proc): nothing may be anonymous; the named kind remains.
  EXPECT_EQ(anonymous_segment_limit("MemTotal: 1000 kB\n", UINT64_MAX), 0u);
  EXPECT_EQ(anonymous_segment_limit("", UINT64_MAX), 0u);
}

// All shared memory together (Shmem: earlier segments, tmpfs files) stays within half the
// machine, as /dev/shm's default size keeps named segments: a run of segments, each under half
// of what is available, cannot take it all.
TEST(SegmentLimit, SharedMemoryInAllStaysWithinHalfTheMachine) {
  const std::string meminfo = "MemTotal: 1000 kB\nMemAvailable: 800 kB\nShmem: 400 kB\n";
  EXPECT_EQ(anonymous_segment_limit(meminfo, UINT64_MAX), 100u * 1024);
  EXPECT_EQ(anonymous_segment_limit("MemTotal: 1000 kB\nMemAvailable: 800 kB\nShmem: 600 kB\n",
                                    UINT64_MAX),
            0u);
}

// Named segments: up to all the memory still available, swap included, or the cgroup's room;
// without /proc/meminfo, /dev/shm's size alone decides.
TEST(SegmentLimit, NamedSegmentsUpToTheAvailableMemoryAndSwap) {
  const std::string meminfo = "MemTotal: 1000 kB\nMemAvailable: 800 kB\nSwapFree: 100 kB\n";
  EXPECT_EQ(named_segment_limit(meminfo, UINT64_MAX), 900u * 1024);
  EXPECT_EQ(named_segment_limit(meminfo, 5000), 5000u);
  EXPECT_EQ(named_segment_limit("MemAvailable: 800 kB\n", UINT64_MAX), 800u * 1024);
  EXPECT_EQ(named_segment_limit("", UINT64_MAX), UINT64_MAX);
}

class MemoryCgroupTree : public synk::testing::TempTree {};

TEST_F(MemoryCgroupTree, V2TheLeastRoomFromTheGroupUpToTheTopApplies) {
  write("/kubepods/pod1/ctr/memory.max", "max\n");
  write("/kubepods/pod1/ctr/memory.current", "5000\n");
  write("/kubepods/pod1/memory.max", "100000\n");
  write("/kubepods/pod1/memory.current", "30000\n");
  write("/kubepods/memory.max", "1000000\n");
  write("/kubepods/memory.current", "990000\n");
  EXPECT_EQ(cgroup_memory_room("0::/kubepods/pod1/ctr\n", root_), 10000u);
  write("/kubepods/memory.max", "max\n");
  EXPECT_EQ(cgroup_memory_room("0::/kubepods/pod1/ctr\n", root_), 70000u);
  // Over its limit already: no room at all.
  write("/kubepods/pod1/memory.current", "200000\n");
  EXPECT_EQ(cgroup_memory_room("0::/kubepods/pod1/ctr\n", root_), 0u);
  EXPECT_EQ(cgroup_memory_room("0::/elsewhere\n", root_), UINT64_MAX);
}

TEST_F(MemoryCgroupTree, V1IsReadWhereTheMemoryControllerIsOnV1) {
  // This machine's layout: v1 controllers beside an empty v2 hierarchy, and v1's "no limit".
  write("/memory/process_api/abc/memory.limit_in_bytes", "9223372036854771712\n");
  write("/memory/process_api/abc/memory.usage_in_bytes", "30547968\n");
  const std::string self = "4:memory:/process_api/abc\n1:cpu:/\n0::/\n";
  EXPECT_GT(cgroup_memory_room(self, root_), std::uint64_t{1} << 62);
  write("/memory/process_api/memory.limit_in_bytes", "1073741824\n");
  write("/memory/process_api/memory.usage_in_bytes", "73741824\n");
  EXPECT_EQ(cgroup_memory_room(self, root_), 1000000000u);
  // A line for other controllers only is not the memory hierarchy.
  EXPECT_EQ(cgroup_memory_room("3:cpu,cpuacct:/process_api\n", root_), UINT64_MAX);
}

TEST(SegmentLimit, ThisMachinesLimitIsAtMostHalfItsMemory) {
  long long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  ASSERT_GT(pages, 0);
  EXPECT_LE(anonymous_segment_limit(), static_cast<std::uint64_t>(pages) *
                                           static_cast<std::uint64_t>(page) / 2);
}

}  // namespace
}  // namespace synk::shm
