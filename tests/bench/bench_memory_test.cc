// synk-bench's memory check, without MPI: what is available (MemAvailable within the cgroup's
// room) and when the node's ranks' buffers do not fit in it, with the message's exact numbers.
#include "bench_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace synk::bench {
namespace {

constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

const char kMeminfo[] =
    "MemTotal:       16384000 kB\n"
    "MemFree:         1000000 kB\n"
    "MemAvailable:    8388608 kB\n"
    "Shmem:             12345 kB\n";

TEST(BenchMemory, AvailableIsMemAvailableWithinTheCgroup) {
  EXPECT_EQ(available_memory(kMeminfo, kNoLimit), 8 * kGiB);
  EXPECT_EQ(available_memory(kMeminfo, 3 * kGiB), 3 * kGiB);
  EXPECT_EQ(available_memory("MemTotal: 100 kB\n", 5 * kGiB), 5 * kGiB);  // no MemAvailable
  EXPECT_EQ(available_memory("", kNoLimit), kNoLimit);                    // nothing known
}

TEST(BenchMemory, TheNodesRanksShareIt) {
  EXPECT_EQ(memory_shortfall(4 * kGiB, 2, 8 * kGiB), "");  // exactly fits
  EXPECT_EQ(memory_shortfall(4 * kGiB, 3, 8 * kGiB),
            "host buffers of 4294967296 bytes per rank (4.0 GiB), 12884901888 (12.0 GiB) for "
            "the 3 ranks on this node, do not fit in the 8589934592 bytes (8.0 GiB) of memory "
            "available (MemAvailable, within the cgroup's limit)");
  EXPECT_EQ(memory_shortfall(9 * kGiB, 1, 8 * kGiB),
            "host buffers of 9663676416 bytes per rank (9.0 GiB) do not fit in the 8589934592 "
            "bytes (8.0 GiB) of memory available (MemAvailable, within the cgroup's limit)");
  EXPECT_EQ(memory_shortfall(kNoLimit, 2, kNoLimit), "");  // unknown: not checked
  // A product past 2^64 is too much, not a small number.
  EXPECT_NE(memory_shortfall(kNoLimit / 2 + 1, 4, 8 * kGiB), "");
}

}  // namespace
}  // namespace synk::bench
