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

// The runs that try the way not in favour, for calls of `call_s` seconds where streaming is
// twice as fast: which of the first `runs` runs stream.
std::vector<bool> streaming_runs(std::uint32_t runs, double call_s) {
  StoreTuner t;
  std::vector<bool> got;
  for (std::uint32_t r = 0; r < runs; ++r) {
    const bool first = call(t, 2 * call_s, call_s);
    for (std::uint32_t i = 1; i < StoreTuner::kRun; ++i)
      EXPECT_EQ(call(t, 2 * call_s, call_s), first);
    got.push_back(first);
  }
  return got;
}

TEST(StoreTuner, TimesBothWaysThenKeepsTheFasterAndRetriesTheOtherLessAndLessOften) {
  StoreTuner t;
  constexpr std::uint32_t kRun = StoreTuner::kRun;
  for (std::uint32_t i = 0; i < 4 * kRun; ++i) call(t, 2e-6, 1e-6);
  EXPECT_DOUBLE_EQ(t.arms(kBroadcast, kBig).cost[0], 2e-6 / static_cast<double>(kBig));
  EXPECT_DOUBLE_EQ(t.arms(kBroadcast, kBig).cost[1], 1e-6 / static_cast<double>(kBig));
  EXPECT_EQ(t.arms(kBroadcast, kBig).calls, 4 * kRun);

  // Calls of 1 us: a run of ordinary stores, a run streaming, then streaming (the faster) but
  // for a run of ordinary stores after 16 runs, then 32, 64, ... up to kExploreMaxEvery.
  const std::vector<bool> got = streaming_runs(1100, 1e-6);
  std::vector<std::uint32_t> tries;
  for (std::uint32_t r = 2; r < got.size(); ++r) {
    if (!got[r]) tries.push_back(r);
  }
  EXPECT_FALSE(got[0]);
  EXPECT_TRUE(got[1]);
  const std::vector<std::uint32_t> want = {16, 48, 112, 240, 496, 752, 1008};
  EXPECT_EQ(tries, want);
  static_assert(StoreTuner::kExploreEvery == 16 && StoreTuner::kExploreMaxEvery == 256);
}

TEST(StoreTuner, LongCallsRetryTheOtherWayAtLeastEveryKExploreSeconds) {
  // Calls of 1.1 ms: 16 runs take 70 ms, and the gap doubles until kExploreSeconds come first:
  // after the try at run 112 (8.8 ms), 112 runs of 4.4 ms.
  const std::vector<bool> got = streaming_runs(700, 1.1e-3);
  std::vector<std::uint32_t> tries;
  for (std::uint32_t r = 2; r < got.size(); ++r) {
    if (!got[r]) tries.push_back(r);
  }
  const std::vector<std::uint32_t> want = {16, 48, 112, 225, 338, 451, 564, 677};
  EXPECT_EQ(tries, want);
  // Calls of 1 s: every kExploreEvery runs, as the first gap is already past the time.
  const std::vector<bool> slow = streaming_runs(70, 1.0);
  for (std::uint32_t r = 2; r < slow.size(); ++r) EXPECT_EQ(slow[r], r % 16 != 0) << r;
}

TEST(StoreTuner, ATryThatFindsTheMachineChangedRetriesSoonAgain) {
  StoreTuner t;
  constexpr std::uint32_t kRun = StoreTuner::kRun;
  // Streaming is faster for 240 runs (tries at runs 16, 48, 112, then the gap is 128 runs)...
  for (std::uint32_t i = 0; i < 200 * kRun; ++i) call(t, 2e-6, 1e-6);
  // ... then ordinary stores get faster (streaming, in use, keeps its time, so nothing tells
  // but a try): the try at run 240 finds it, the way changes, and the way now out of favour
  // (streaming) is tried again after 16 runs, not 256, then after 32.
  std::vector<bool> got;
  for (std::uint32_t i = 0; i < 100 * kRun; ++i) got.push_back(call(t, 0.5e-6, 1e-6));
  auto run_streams = [&](std::uint32_t run) { return got[(run - 200) * kRun]; };
  for (std::uint32_t run = 200; run < 240; ++run) EXPECT_TRUE(run_streams(run)) << run;
  EXPECT_FALSE(run_streams(240));
  for (std::uint32_t run = 241; run < 256; ++run) EXPECT_FALSE(run_streams(run)) << run;
  EXPECT_TRUE(run_streams(256));
  for (std::uint32_t run = 257; run < 288; ++run) EXPECT_FALSE(run_streams(run)) << run;
  EXPECT_TRUE(run_streams(288));
  EXPECT_FALSE(run_streams(289));
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
  // The first kWarm calls of each run take 0.01 s (they would carry the other way's lag):
  // they must not count, not even as the run's fastest.
  for (std::uint32_t i = 0; i < 2 * StoreTuner::kRun; ++i) {
    const bool warm = i % StoreTuner::kRun < StoreTuner::kWarm;
    call(t, warm ? 0.01 : 2.0, warm ? 0.01 : 1.0);
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
  // And back: streaming gets slower than ordinary stores' last (old, 2.5 s mean) time; the
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

TEST(StoreTuner, ANewSizeStartsFromItsNearestTimedNeighbour) {
  StoreTuner t;
  constexpr std::uint32_t kRun = StoreTuner::kRun;
  // Broadcast of kBig has timed both ways: streaming wins.
  for (std::uint32_t i = 0; i < 3 * kRun; ++i) call(t, 2e-6, 1e-6, kBroadcast, kBig);
  // Broadcast of 4 and 16 kBig stream from their first call, with no run of ordinary stores
  // (until the first try, kExploreEvery runs on), and start from the neighbour's costs.
  for (std::size_t bytes : {kBig * 4, kBig * 16}) {
    for (std::uint32_t i = 0; i < StoreTuner::kExploreEvery * kRun; ++i)
      EXPECT_TRUE(call(t, 2e-6, 1e-6, kBroadcast, bytes)) << bytes << " " << i;
    EXPECT_FALSE(call(t, 2e-6, 1e-6, kBroadcast, bytes)) << bytes;
  }
  // Another collective learns apart: a run of ordinary stores first.
  for (std::uint32_t i = 0; i < kRun; ++i) EXPECT_FALSE(call(t, 2e-6, 1e-6, kAllGather, kBig * 4));
  EXPECT_TRUE(call(t, 2e-6, 1e-6, kAllGather, kBig * 4));
  // A class whose neighbour has timed only one way learns both.
  StoreTuner u;
  for (std::uint32_t i = 0; i < kRun; ++i) call(u, 2e-6, 1e-6, kBroadcast, kBig);
  EXPECT_FALSE(call(u, 2e-6, 1e-6, kBroadcast, kBig * 2));
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
  t.choose(kAllGather, kBig);  // the next calls' times must not go to the broadcast's class
  t.record(100.0);
  EXPECT_DOUBLE_EQ(t.arms(kAllGather, kBig).run_best, 100.0 / static_cast<double>(kBig));
  EXPECT_EQ(t.arms(kBroadcast, kBig).run_best, 0.0);
  call(t, 100.0, 100.0, kAllGather);  // the all_gather's run ends
  EXPECT_DOUBLE_EQ(t.arms(kBroadcast, kBig).cost[1], streaming);
  EXPECT_GT(t.arms(kAllGather, kBig).cost[1], 1.0 / static_cast<double>(kBig));
}

// One timed call of a run 10-100x slower than the rest (the host took the CPU away) does not
// turn the class to the slower way; a run whose timed calls are all slow does.
TEST(StoreTuner, OneSlowCallDoesNotMisleadIt) {
  StoreTuner t;
  constexpr std::uint32_t kRun = StoreTuner::kRun;
  for (std::uint32_t i = 0; i < 2 * kRun; ++i) call(t, 4.0, 1.0);  // a run each way
  for (int run = 0; run < 12; ++run) {
    for (std::uint32_t i = 0; i < kRun; ++i) {
      const bool outlier = i == kRun - 1 - static_cast<std::uint32_t>(run % 2);
      EXPECT_TRUE(call(t, 4.0, outlier ? 100.0 : 1.0)) << run << " " << i;
    }
  }
  EXPECT_DOUBLE_EQ(t.arms(kBroadcast, kBig).cost[1], 1.0 / static_cast<double>(kBig));
  for (std::uint32_t i = 0; i < kRun; ++i) call(t, 4.0, 100.0);
  EXPECT_FALSE(call(t, 4.0, 100.0));
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
