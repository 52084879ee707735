// The shm backend's choice between ordinary and non-temporal stores (store_tuner.h), driven
// with made-up call times, and the non-temporal copy itself against memcpy.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/shm/store_tuner.h"
#include "backends/shm/stream_copy.h"

namespace synk::shm {
namespace {

constexpr std::size_t kBig = StoreTuner::kMinBytes;
constexpr int kBroadcast = 2, kAllGather = 3;

// One call: the choice, then a time of `ordinary_s` or `streaming_s` for it.
bool call(StoreTuner& t, double ordinary_s, double streaming_s, int coll = kBroadcast,
          std::size_t bytes = kBig) {
  const bool streams = t.choose(coll, bytes);
  t.record(streams ? streaming_s : ordinary_s);
  return streams;
}

TEST(StoreTuner, SmallCallsUseOrdinaryStoresAndAreNotTimed) {
  StoreTuner t;
  for (int i = 0; i < 40; ++i) EXPECT_FALSE(call(t, 1.0, 0.001, kBroadcast, kBig - 1));
  EXPECT_FALSE(t.tuned(kBig - 1));
  EXPECT_TRUE(t.tuned(kBig));
  EXPECT_EQ(t.arms(kBroadcast, kBig - 1).calls, 0u);
  EXPECT_EQ(t.arms(kBroadcast, kBig - 1).cost[1], 0.0);
  EXPECT_FALSE(StoreTuner(StoreMode::streaming).tuned(kBig));
}

TEST(StoreTuner, FixedModesNeverChange) {
  StoreTuner never(StoreMode::ordinary), always(StoreMode::streaming);
  for (std::size_t bytes : {std::size_t{8}, kBig, kBig << 8}) {
    for (int i = 0; i < 40; ++i) {
      EXPECT_FALSE(call(never, 9.0, 1.0, kBroadcast, bytes));
      EXPECT_TRUE(call(always, 1.0, 9.0, kBroadcast, bytes));
    }
  }
}

TEST(StoreTuner, TimesBothWaysThenKeepsTheFasterAndRetriesTheOtherNowAndThen) {
  StoreTuner t;
  constexpr std::uint32_t kRun = StoreTuner::kRun, kCycle = kRun * StoreTuner::kExploreEvery;
  std::vector<bool> got;
  for (std::uint32_t i = 0; i < 2 * kCycle + 8; ++i) got.push_back(call(t, 2.0, 1.0));
  for (std::uint32_t i = 0; i < got.size(); ++i) {
    // A run of ordinary stores, a run streaming, then streaming (the faster) but for a run of
    // ordinary stores every kExploreEvery runs.
    const std::uint32_t run = i / kRun;
    const bool ordinary = run == 0 || (run >= 2 && run % StoreTuner::kExploreEvery == 0);
    EXPECT_EQ(got[i], !ordinary) << i;
  }
  EXPECT_DOUBLE_EQ(t.arms(kBroadcast, kBig).cost[0], 2.0 / static_cast<double>(kBig));
  EXPECT_DOUBLE_EQ(t.arms(kBroadcast, kBig).cost[1], 1.0 / static_cast<double>(kBig));
  EXPECT_EQ(t.arms(kBroadcast, kBig).calls, got.size());
}

TEST(StoreTuner, StreamingIsKeptOnlyWhenItIsClearlyFaster) {
  StoreTuner t, u;
  const double within = 1.0 / (StoreTuner::kStreamMargin * 0.98);  // faster, not by the margin
  const double beyond = 1.0 / (StoreTuner::kStreamMargin * 1.1);
  for (std::uint32_t i = 0; i < 2 * StoreTuner::kRun; ++i) {
    call(t, 1.0, within);
    call(u, 1.0, beyond);
  }
  EXPECT_FALSE(call(t, 1.0, within));
  EXPECT_TRUE(call(u, 1.0, beyond));
}

TEST(StoreTuner, OnlyTheLastCallsOfARunAreTimed) {
  StoreTuner t;
  // The first kWarm calls of each run take 100 s (they would carry the other way's lag):
  // they must not count.
  for (std::uint32_t i = 0; i < 2 * StoreTuner::kRun; ++i) {
    const bool warm = i % StoreTuner::kRun < StoreTuner::kWarm;
    call(t, warm ? 100.0 : 2.0, warm ? 100.0 : 1.0);
  }
  EXPECT_DOUBLE_EQ(t.arms(kBroadcast, kBig).cost[0], 2.0 / static_cast<double>(kBig));
  EXPECT_DOUBLE_EQ(t.arms(kBroadcast, kBig).cost[1], 1.0 / static_cast<double>(kBig));
  // What the caller is told, so that it reads the clock only for the calls that count.
  for (std::uint32_t i = 0; i < StoreTuner::kRun; ++i) {
    t.choose(kBroadcast, kBig);
    EXPECT_EQ(t.timing(), i >= StoreTuner::kWarm) << i;
  }
  t.choose(kBroadcast, kBig - 1);
  EXPECT_FALSE(t.timing());
}

// A writer's call waits for its reader to be done with the step before last, so each call's
// time is the writer's own stores plus the reader's work on the call two before. Streaming
// stores are cheap to make and dear to read (the reader shares the writer's cache): timed call
// by call, streaming would look faster than it is.
TEST(StoreTuner, AReadersLagTwoCallsLateDoesNotMisleadIt) {
  StoreTuner t;
  const double own[2] = {0.5, 0.2}, reader[2] = {0.5, 1.8};  // ordinary: 1.0 a call; streaming: 2.0
  std::vector<int> arms = {0, 0};
  int streamed = 0;
  constexpr int kCalls = 400;
  for (int i = 0; i < kCalls; ++i) {
    const int arm = t.choose(kBroadcast, kBig) ? 1 : 0;
    t.record(own[arm] + reader[arms[arms.size() - 2]]);
    arms.push_back(arm);
    streamed += arm;
  }
  // Only the second run and the exploring runs stream.
  const int cycle = static_cast<int>(StoreTuner::kRun * StoreTuner::kExploreEvery);
  EXPECT_LE(streamed, static_cast<int>(StoreTuner::kRun) * (2 + kCalls / cycle));
  EXPECT_FALSE(t.choose(kBroadcast, kBig));
}

TEST(StoreTuner, FollowsTheMachineWhenTheFasterWayChanges) {
  StoreTuner t;
  constexpr std::uint32_t kRun = StoreTuner::kRun;
  for (std::uint32_t i = 0; i < 2 * kRun; ++i) call(t, 1.0, 1.5);  // ordinary stores are faster
  // Now the reader sits on another cache: ordinary stores take 4 s. The run under way keeps
  // its way; its timed calls raise ordinary stores' running mean past streaming's 1.5 s, so
  // the next run streams.
  for (std::uint32_t i = 0; i < kRun; ++i) EXPECT_FALSE(call(t, 4.0, 1.0)) << i;
  EXPECT_TRUE(call(t, 4.0, 1.0));
  for (int i = 0; i < 10; ++i) call(t, 4.0, 1.0);
  // And back: streaming gets slower than ordinary stores' last (old, 3.25 s mean) time; the
  // next run retrying ordinary stores, at most kExploreEvery runs later, finds them fast again.
  int streamed = 0;
  const std::uint32_t cycle = kRun * StoreTuner::kExploreEvery;
  for (std::uint32_t i = 0; i < 2 * cycle; ++i) streamed += call(t, 1.0, 2.0);
  EXPECT_LE(streamed, static_cast<int>(cycle + kRun));
  EXPECT_FALSE(call(t, 1.0, 2.0));
}

TEST(StoreTuner, EachCollectiveAndSizeClassIsTunedApart) {
  StoreTuner t;
  for (int i = 0; i < 8; ++i) {
    call(t, 2.0, 1.0, kBroadcast, kBig);      // broadcast 1 MiB: streaming wins
    call(t, 1.0, 2.0, kAllGather, kBig);      // all_gather 1 MiB: ordinary wins
    call(t, 1.0, 2.0, kBroadcast, kBig * 4);  // broadcast 4 MiB: ordinary wins
  }
  EXPECT_TRUE(call(t, 2.0, 1.0, kBroadcast, kBig + 5));  // same class as kBig
  EXPECT_FALSE(call(t, 1.0, 2.0, kAllGather, kBig));
  EXPECT_FALSE(call(t, 1.0, 2.0, kBroadcast, kBig * 4 + 100));
}

TEST(StoreTuner, ACallThatNeverEndedIsNotCounted) {
  StoreTuner t;
  for (int i = 0; i < 10; ++i) {
    call(t, 2.0, 1.0);
    call(t, 2.0, 1.0, kAllGather);
  }
  // Both classes are at the third call of a run: timed.
  const double streaming = t.arms(kBroadcast, kBig).cost[1];
  t.choose(kBroadcast, kBig);  // this call throws: no record()
  t.choose(kAllGather, kBig);  // the next call's time must not go to the broadcast's class
  t.record(100.0);
  EXPECT_DOUBLE_EQ(t.arms(kBroadcast, kBig).cost[1], streaming);
  EXPECT_GT(t.arms(kAllGather, kBig).cost[1], 1.0 / static_cast<double>(kBig));
}

TEST(StoreTuner, OnlyLargeOutputsStreamIntoTheCallersBuffer) {
  const StoreTuner tuned(StoreMode::tuned, 1000), never(StoreMode::ordinary, 1000),
      always(StoreMode::streaming, 1000);
  EXPECT_FALSE(tuned.stream_out(999));
  EXPECT_TRUE(tuned.stream_out(1000));
  EXPECT_FALSE(never.stream_out(std::size_t{1} << 40));
  EXPECT_TRUE(always.stream_out(8));
  // The default: half the last-level cache, or 16 MiB where the machine does not say.
  const std::size_t llc = last_level_cache_bytes();
  const std::size_t half = llc ? llc / 2 : std::size_t{16} << 20;
  const StoreTuner by_default;
  EXPECT_FALSE(by_default.stream_out(half - 1));
  EXPECT_TRUE(by_default.stream_out(half));
}

TEST(StreamCopy, CopiesExactlyAtEveryAlignmentAndLength) {
  std::vector<unsigned char> src(4096 + 256), dst(4096 + 256), want(4096 + 256);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  for (std::size_t len :
       {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{63},
        std::size_t{64}, std::size_t{65}, std::size_t{79}, std::size_t{80}, std::size_t{127},
        std::size_t{1000}, std::size_t{4096}}) {
    for (std::size_t so = 0; so < 20; ++so) {
      for (std::size_t d = 0; d < 20; ++d) {
        std::memset(dst.data(), 0xEE, dst.size());
        std::memcpy(want.data(), dst.data(), dst.size());
        std::memcpy(want.data() + d, src.data() + so, len);
        stream_copy(dst.data() + d, src.data() + so, len);
        ASSERT_EQ(dst, want) << "length " << len << ", src offset " << so << ", dst offset " << d;
      }
    }
  }
}

TEST(StreamCopy, CopiesALargeBuffer) {
  std::vector<unsigned char> src((4u << 20) + 3), dst(src.size() + 8, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i % 251);
  stream_copy(dst.data() + 1, src.data(), src.size());
  EXPECT_EQ(0, std::memcmp(dst.data() + 1, src.data(), src.size()));
  EXPECT_EQ(dst[0], 0);
  EXPECT_EQ(dst[src.size() + 1], 0);
}

}  // namespace
}  // namespace synk::shm
