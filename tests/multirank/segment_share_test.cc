// try_share_segment (backends/shm/segment_share.h) under mpiexec: rank 0 creates a segment and
// every rank maps it, anonymous by default (nothing in /dev/shm at any moment), named when
// asked (the fallback), and either way the same memory on every rank and no name left after.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "backends/shm/segment_share.h"
#include "mpi_test.h"

namespace {

using synk::shm::SegmentKind;
using synk::shm::SharedSegment;
using ::testing::StartsWith;

// Rank r writes word r + 1; every rank then reads every rank's word.
void check_shared(const SharedSegment& s, std::size_t bytes) {
  int me = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  ASSERT_TRUE(s.ok) << s.error;
  ASSERT_TRUE(s.created);
  EXPECT_EQ(s.error, "");
  ASSERT_EQ(s.segment.size(), bytes);
  auto* words = static_cast<volatile std::uint64_t*>(s.segment.data());
  words[me + 1] = 1000 + static_cast<std::uint64_t>(me);
  words[bytes / 8 - 1 - static_cast<std::size_t>(me)] = 7;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(words[r + 1], 1000u + static_cast<std::uint64_t>(r)) << "rank " << r << "'s word";
    EXPECT_EQ(words[bytes / 8 - 1 - static_cast<std::size_t>(r)], 7u);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(SegmentShare, AnonymousByDefaultWithTheSameNameOnEveryRank) {
  constexpr std::size_t kBytes = std::size_t{3} << 20;
  SharedSegment s = synk::shm::try_share_segment(MPI_COMM_WORLD, kBytes);
  check_shared(s, kBytes);
  EXPECT_THAT(s.segment.name(), StartsWith("memfd:synk-"));
  char name[128] = {};
  s.segment.name().copy(name, sizeof name - 1);
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
  EXPECT_EQ(s.segment.name(), name);
  EXPECT_NE(access(("/dev/shm/" + s.segment.name().substr(6)).c_str(), F_OK), 0);
}

TEST(SegmentShare, NamedWhenAskedAndUnlinkedOnceEveryRankMappedIt) {
  constexpr std::size_t kBytes = 1 << 20;
  SharedSegment s = synk::shm::try_share_segment(MPI_COMM_WORLD, kBytes, SegmentKind::named);
  check_shared(s, kBytes);
  EXPECT_THAT(s.segment.name(), StartsWith("/synk-"));
  EXPECT_NE(access(("/dev/shm" + s.segment.name()).c_str(), F_OK), 0) << s.segment.name();
}

// Too large for memory: the named kind is tried (a memfd would not refuse it, only run the
// machine out of memory) and refused before any file is made, since it is more than the memory
// the process may still take (a /dev/shm larger than memory, seen on a GPU VM, would not refuse
// it but run the machine out of memory); the reason on every rank.
TEST(SegmentShare, LargerThanMemoryIsRefusedWithRankZerosReasonOnEveryRank) {
  const std::size_t huge = std::size_t{1} << 50;
  SharedSegment s = synk::shm::try_share_segment(MPI_COMM_WORLD, huge);
  EXPECT_FALSE(s.ok);
  EXPECT_FALSE(s.created);
  EXPECT_THAT(s.error, ::testing::HasSubstr("cannot reserve 1125899906842624 bytes of shared "
                                            "memory: more than the "));
  EXPECT_THAT(s.error, ::testing::HasSubstr("bytes of memory this process may still take"));
  EXPECT_EQ(s.segment.data(), nullptr);
}

}  // namespace
