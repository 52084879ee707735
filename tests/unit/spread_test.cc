// Spread (core/spread.h): the largest and smallest of each value after a max-reduction of the
// values beside their complements; here the reduction of two "ranks" is made by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "core/spread.h"

namespace synk::detail {
namespace {

Spread reduced(Spread a, Spread b) {
  for (int i = 0; i < a.size(); ++i) a.data()[i] = std::max(a.data()[i], b.data()[i]);
  return a;
}

TEST(Spread, LargestAndSmallestOfEachValue) {
  const Spread r = reduced(Spread({5, 0, UINT64_MAX}), Spread({5, 9, 1}));
  EXPECT_TRUE(r.same(0));
  EXPECT_EQ(r.largest(0), 5u);
  EXPECT_FALSE(r.same(1));
  EXPECT_EQ(r.largest(1), 9u);
  EXPECT_EQ(r.smallest(1), 0u);
  EXPECT_FALSE(r.same(2));  // the largest values, where a negation overflowed
  EXPECT_EQ(r.largest(2), UINT64_MAX);
  EXPECT_EQ(r.smallest(2), 1u);
  EXPECT_EQ(r.size(), 6);
}

TEST(Spread, CountsOfTwoToTheSixtyThreeAndMore) {
  const std::uint64_t big = std::uint64_t{1} << 63;
  const Spread r = reduced(Spread({big}), Spread({big}));
  EXPECT_TRUE(r.same(0));
  EXPECT_EQ(r.smallest(0), big);
}

}  // namespace
}  // namespace synk::detail
