// The shm collectives' vector copy (vector_copy.h) against memcpy: every byte in place, none
// written outside the destination, at every alignment of source and destination and at the
// lengths where its loop, its head and its tail meet.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "backends/shm/vector_copy.h"

namespace synk::shm {
namespace {

void expect_exact(std::size_t len, std::size_t src_offset, std::size_t dst_offset) {
  const std::size_t room = len + 128;
  std::vector<unsigned char> src(room), dst(room, 0xEE), want(room, 0xEE);
  for (std::size_t i = 0; i < room; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  std::memcpy(want.data() + dst_offset, src.data() + src_offset, len);
  vector_copy(dst.data() + dst_offset, src.data() + src_offset, len);
  ASSERT_EQ(dst, want) << "length " << len << ", src offset " << src_offset << ", dst offset "
                       << dst_offset;
}

TEST(VectorCopy, CopiesExactlyAtEveryAlignmentAroundItsThresholdAndLoop) {
  // 2048 is where it stops handing the copy to memcpy; 128 bytes a turn of its loop; the head
  // up to a 32-byte boundary of dst is 0-31 bytes.
  for (std::size_t len : {std::size_t{0}, std::size_t{100}, std::size_t{2047}, std::size_t{2048},
                          std::size_t{2049}, std::size_t{2048 + 31}, std::size_t{2048 + 127},
                          std::size_t{2048 + 128}, std::size_t{2048 + 129}, std::size_t{4096 + 77}}) {
    for (std::size_t so = 0; so < 40; so += 3) {
      for (std::size_t d = 0; d < 40; ++d) expect_exact(len, so, d);
    }
  }
}

TEST(VectorCopy, CopiesALargeBufferAtOddOffsets) {
  for (std::size_t d : {std::size_t{0}, std::size_t{1}, std::size_t{16}, std::size_t{33}}) {
    expect_exact((1u << 20) + 5, 64, d);
  }
}

}  // namespace
}  // namespace synk::shm
