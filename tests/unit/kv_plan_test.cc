// KeyValue's pure parts: the bucket plan of a cycle (kv_plan.h) and the stall inspector's
// reading of every rank's status bytes (kv_stall.h).
#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_plan.h"
#include "kv/kv_stall.h"

namespace synk::detail {
namespace {

ReadyKey key(std::size_t slot, std::int64_t priority, std::size_t bytes,
             DataType t = DataType::float32, int owner = -1) {
  ReadyKey k;
  k.slot = slot;
  k.priority = priority;
  k.bytes = bytes;
  k.dtype = t;
  k.owner = owner;
  return k;
}

std::vector<std::vector<std::size_t>> slots_of(const std::vector<Bucket>& buckets) {
  std::vector<std::vector<std::size_t>> out;
  for (const Bucket& b : buckets) out.push_back(b.slots);
  return out;
}

TEST(KvPlan, HighestPriorityFirstThenSlot) {
  const auto b = plan_buckets({key(0, 1, 8), key(1, 5, 8), key(2, 1, 8), key(3, 9, 8)}, 0);
  EXPECT_EQ(slots_of(b), (std::vector<std::vector<std::size_t>>{{3}, {1}, {0}, {2}}));
  for (const Bucket& x : b) EXPECT_FALSE(x.fused);
}

TEST(KvPlan, FusesUpToTheFusionSize) {
  std::vector<ReadyKey> ready;
  for (std::size_t s = 0; s < 10; ++s) ready.push_back(key(s, 0, 400));
  const auto b = plan_buckets(ready, 1000);  // two keys of 400 fit, a third does not
  ASSERT_EQ(b.size(), 5u);
  for (const Bucket& x : b) {
    EXPECT_TRUE(x.fused);
    EXPECT_EQ(x.bytes, 800u);
    EXPECT_EQ(x.slots.size(), 2u);
  }
  EXPECT_EQ(b[0].slots, (std::vector<std::size_t>{0, 1}));
}

TEST(KvPlan, ALargeKeyRunsAloneAndKindsDoNotMix) {
  const auto b = plan_buckets({key(0, 3, 100), key(1, 2, 5000), key(2, 1, 100, DataType::float64),
                               key(3, 0, 100), key(4, 0, 100, DataType::float32, 1),
                               key(5, 0, 100)},
                              1000);
  EXPECT_EQ(slots_of(b), (std::vector<std::vector<std::size_t>>{{0}, {1}, {2}, {3, 5}, {4}}));
  EXPECT_TRUE(b[0].fused);
  EXPECT_FALSE(b[1].fused);
  EXPECT_EQ(b[4].owner, 1);
}

// A split key (reduced in parts) runs alone even where it would fit in a bucket.
TEST(KvPlan, ASplitKeyIsNeverFused) {
  ReadyKey split = key(1, 0, 300);
  split.split = true;
  const auto b = plan_buckets({key(0, 0, 100), split, key(2, 0, 100)}, 1000);
  EXPECT_EQ(slots_of(b), (std::vector<std::vector<std::size_t>>{{0}, {1}, {2}}));
  EXPECT_FALSE(b[1].fused);
}

// A key of lower priority never joins a bucket that runs before a key of higher priority: a
// tiny top key fused with a large low one waited for it, and a middle key of another dtype ran
// after both.
TEST(KvPlan, NoKeyRunsAfterOrWaitsForOneOfLowerPriority) {
  const auto b = plan_buckets({key(0, 10, 64), key(1, 5, 128, DataType::float64),
                               key(2, 1, 1 << 20), key(3, 1, 64)},
                              64 << 20);
  EXPECT_EQ(slots_of(b), (std::vector<std::vector<std::size_t>>{{0}, {1}, {2, 3}}));
}

// Within one priority, keys of one kind fuse whatever their slots' order.
TEST(KvPlan, KeysOfOnePriorityFuseByKind) {
  std::vector<ReadyKey> ready;
  for (std::size_t s = 0; s < 6; ++s) {
    ready.push_back(key(s, 0, 100, s % 2 == 0 ? DataType::float32 : DataType::float16));
  }
  const auto b = plan_buckets(ready, 1000);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].slots, (std::vector<std::size_t>{1, 3, 5}));  // float16 comes first
  EXPECT_EQ(b[1].slots, (std::vector<std::size_t>{0, 2, 4}));
}

TEST(KvStall, FindsPartKeysAndNamesTheRanks) {
  // 3 ranks, 3 keys: key 10 pushed everywhere; key 11 by ranks 0 and 2, rank 2 waiting long;
  // key 12 by rank 1 only, recently.
  const std::vector<std::uint8_t> status = {kPushed, kPushed,    kNotPushed,   // rank 0
                                            kPushed, kNotPushed, kPushed,      // rank 1
                                            kPushed, kTimedOut,  kNotPushed};  // rank 2
  const std::vector<int> keys = {10, 11, 12};
  const auto stalled = find_stalled(status, 3, keys);
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0].key, 11);
  EXPECT_EQ(stalled[0].column, 1u);
  EXPECT_EQ(stalled[0].pushed, (std::vector<int>{0, 2}));
  EXPECT_EQ(stalled[0].missing, (std::vector<int>{1}));
  EXPECT_EQ(stalled[0].worst, kTimedOut);
  EXPECT_EQ(stalled[0].reporter, 2);
  EXPECT_EQ(stall_error(stalled[0], 3),
            "KeyValue: key 11 was pushed by ranks 0, 2 but not by rank 1 within 3 s (SYNK_TIMEOUT)");
  // At close every part key counts, however short its wait.
  EXPECT_EQ(find_stalled(status, 3, keys, kPushed).size(), 2u);
}

// A key that a rank which has closed never pushed can never be reduced; one that only open ranks
// miss still can.
TEST(KvStall, AKeyMissingFromAClosedRankFails) {
  const std::vector<std::uint8_t> status = {kPushed, kPushed,     // rank 0
                                            kNotPushed, kPushed,  // rank 1, closed
                                            kPushed, kNotPushed};  // rank 2, open
  const auto stalled = find_stalled(status, 3, std::vector<int>{7, 8}, kPushed);
  ASSERT_EQ(stalled.size(), 2u);
  const std::vector<bool> closed = {false, true, false};
  EXPECT_EQ(closed_unpushed_error(stalled[0], closed),
            "KeyValue: rank 1 closed this KeyValue without pushing key 7, which ranks 0, 2 "
            "pushed: it can never be reduced (every rank pushes the same keys before it closes)");
  EXPECT_EQ(closed_unpushed_error(stalled[1], closed), "");
}

// A joined rank (2) pushes the identity of a key another rank pushed (key 7, pushed by rank
// 0): it is not named as missing it. A key no rank pushed (8) stays as it was, and so does a
// rank that closed without joining (1).
TEST(KvStall, AJoinedRankCountsAsHavingPushedWhatOthersPushed) {
  // Rows of ranks 0, 1, 2; columns keys 7, 8.
  std::vector<std::uint8_t> status = {kPushed, kNotPushed,  // rank 0
                                      kNotPushed, kNotPushed,  // rank 1 (closed)
                                      kNotPushed, kNotPushed};  // rank 2 (joined)
  count_joined_as_pushed(status, {false, false, true}, 2);
  EXPECT_EQ(status, (std::vector<std::uint8_t>{kPushed, kNotPushed, kNotPushed, kNotPushed,
                                               kPushed, kNotPushed}));
  // Key 9, pushed by rank 1 just before it joined: rank 0, joined too, has it as well.
  std::vector<std::uint8_t> both = {kNotPushed, kPushed};
  count_joined_as_pushed(both, {true, true}, 1);
  EXPECT_EQ(both, (std::vector<std::uint8_t>{kPushed, kPushed}));
  const auto stalled = find_stalled(status, 3, std::vector<int>{7, 8}, kPushed);
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0].missing, (std::vector<int>{1}));
  EXPECT_EQ(closed_unpushed_error(stalled[0], {false, true, false}),
            "KeyValue: rank 1 closed this KeyValue without pushing key 7, which ranks 0, 2 "
            "pushed: it can never be reduced (every rank pushes the same keys before it closes)");
}

TEST(KvStall, RankListIsShortForManyRanks) {
  std::vector<int> many(12);
  for (int i = 0; i < 12; ++i) many[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(rank_list({3}), "rank 3");
  EXPECT_EQ(rank_list(many), "ranks 0, 1, 2, 3, 4, 5, 6, 7 and 4 more");
}

}  // namespace
}  // namespace synk::detail
