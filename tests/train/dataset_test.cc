// How a global batch's rows are split across ranks.
#include "dataset.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace fmnist {
namespace {

// Rows split at linspace boundaries: disjoint, covering, in rank order, sizes within one.
TEST(LinspaceShare, CoversEvenly) {
  for (int n = 1; n <= 5; ++n) {
    for (std::size_t count = 0; count <= 300; ++count) {
      std::size_t next = 0, smallest = count, largest = 0;
      for (int r = 0; r < n; ++r) {
        const Range s = linspace_share(count, r, n);
        ASSERT_EQ(s.lo, next) << "count " << count << " rank " << r << " of " << n;
        ASSERT_LE(s.lo, s.hi);
        smallest = std::min(smallest, s.hi - s.lo);
        largest = std::max(largest, s.hi - s.lo);
        next = s.hi;
      }
      ASSERT_EQ(next, count);
      ASSERT_LE(largest - smallest, 1u) << "count " << count << " over " << n;
    }
  }
  EXPECT_EQ(linspace_share(256, 1, 3).lo, 85u);
  EXPECT_EQ(linspace_share(256, 2, 3).lo, 170u);
}

}  // namespace
}  // namespace fmnist
