// Tiny steps: eager steps that put at most Group::kTinyBytes into each rank's part carry their
// data in the compact call copies (shm_layout.h, StepCall), two steps to a cache line, instead
// of in the entries. These tests pin down that every collective stays exact across tiny and
// full steps mixed, with ranks running ahead over the boundary, and that a mismatch of a tiny
// step (against a tiny or a full one) is found as the entries' check finds it: at once by the
// rank that reads, at its next call by a rank that only wrote. Real processes (fork_harness.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fork_harness.h"
#include "step_checks.h"
#include "synk/error.h"

namespace synk::shm::testing {
namespace {

using ::testing::HasSubstr;

class ShmTinyStep : public NoSegmentLeft<> {};

static_assert(Group::kTinyBytes == 8, "the sizes below straddle an 8-byte tiny step");

// One root broadcasting 8 bytes many times: it runs up to kEagerDepth calls ahead, two calls
// share a line, and every reader must get every call's own value. 4 ranks on 2 cores.
TEST_F(ShmTinyStep, ALongRunOfTinyBroadcastsIsExact) {
  const auto out = run_ranks(4, {}, [](Group& g, auto report) {
    const int calls = static_cast<int>(Group::kEagerDepth) * 20;
    for (int i = 0; i < calls; ++i) {
      std::int64_t v = g.rank() == 1 ? std::int64_t{1000} * i + 7 : -1;
      broadcast(g, &v, 1, DataType::int64, 1);
      if (v != std::int64_t{1000} * i + 7) {
        report("call " + std::to_string(i) + ": got " + std::to_string(v));
        return 1;
      }
    }
    return in_step(g) ? 0 : 5;
  });
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
}

// Every eager collective at 1-3 int32 per rank (4-12 bytes: tiny and not), roots moving, in
// one long run: exact results on every rank. 3 ranks on 2 cores.
TEST_F(ShmTinyStep, TinyAndFullStepsMixedStayExact) {
  const auto out = run_ranks(3, {}, [](Group& g, auto report) {
    const int n = g.size(), me = g.rank();
    for (int it = 0; it < 400; ++it) {
      const std::size_t c = 1 + static_cast<std::size_t>(it % 3);
      const int root = it % n;
      const auto fail = [&](const char* what) {
        report(std::string(what) + " wrong at iteration " + std::to_string(it));
        return 1;
      };
      std::vector<std::int32_t> b(c, me == root ? it : -1);
      broadcast(g, b.data(), c, DataType::int32, root);
      if (std::any_of(b.begin(), b.end(), [&](std::int32_t x) { return x != it; })) {
        return fail("broadcast");
      }
      std::vector<std::int32_t> s(c, me + it), r(c, -1);
      reduce(g, s.data(), r.data(), c, DataType::int32, ReduceOp::sum, root);
      const std::int32_t sum = n * it + n * (n - 1) / 2;
      if (me == root && std::any_of(r.begin(), r.end(), [&](std::int32_t x) { return x != sum; })) {
        return fail("reduce");
      }
      all_reduce(g, s.data(), r.data(), c, DataType::int32, ReduceOp::sum);
      if (std::any_of(r.begin(), r.end(), [&](std::int32_t x) { return x != sum; })) {
        return fail("all_reduce");
      }
      std::vector<std::int32_t> all(c * n, -1);
      all_gather(g, s.data(), all.data(), c, DataType::int32);
      for (std::size_t k = 0; k < all.size(); ++k) {
        if (all[k] != static_cast<std::int32_t>(k / c) + it) return fail("all_gather");
      }
      // scatter: c elements per rank from n * c in all (never tiny on 3 ranks; the 2-rank
      // test below has tiny ones).
      std::vector<std::int32_t> src(c * n), one(c, -1);
      for (std::size_t k = 0; k < src.size(); ++k) src[k] = static_cast<std::int32_t>(k) + it;
      scatter(g, src.data(), one.data(), c, DataType::int32, root);
      for (std::size_t k = 0; k < c; ++k) {
        if (one[k] != static_cast<std::int32_t>(me * c + k) + it) return fail("scatter");
      }
      std::vector<std::int32_t> gathered(c * n, -1);
      gather(g, s.data(), gathered.data(), c, DataType::int32, root);
      for (std::size_t k = 0; me == root && k < gathered.size(); ++k) {
        if (gathered[k] != static_cast<std::int32_t>(k / c) + it) return fail("gather");
      }
    }
    return in_step(g) ? 0 : 5;
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
}

// On 2 ranks a scatter and a reduce_scatter of 1 int32 per rank are tiny (8 bytes in all), of
// 2 are not: both kinds in a run, roots moving, exact on both ranks.
TEST_F(ShmTinyStep, TinyScattersAndReduceScattersOnTwoRanksAreExact) {
  const auto out = run_ranks(2, {}, [](Group& g, auto report) {
    const int me = g.rank();
    for (int it = 0; it < 300; ++it) {
      const std::size_t c = 1 + static_cast<std::size_t>(it % 2);
      const int root = (it / 2) % 2;
      std::vector<std::int32_t> src(2 * c), mine(c, -1);
      for (std::size_t k = 0; k < src.size(); ++k) {
        src[k] = 100 * it + static_cast<std::int32_t>(k) + (me == root ? 0 : 50);
      }
      scatter(g, src.data(), mine.data(), c, DataType::int32, root);
      for (std::size_t k = 0; k < c; ++k) {
        if (mine[k] != 100 * it + static_cast<std::int32_t>(me * c + k)) {
          report("scatter wrong at iteration " + std::to_string(it));
          return 1;
        }
      }
      std::vector<std::int32_t> sum(c, -1);
      reduce_scatter(g, src.data(), sum.data(), c, DataType::int32, ReduceOp::sum);
      for (std::size_t k = 0; k < c; ++k) {  // both ranks' src[me * c + k]: one has +50
        if (sum[k] != 2 * (100 * it + static_cast<std::int32_t>(me * c + k)) + 50) {
          report("reduce_scatter wrong at iteration " + std::to_string(it));
          return 2;
        }
      }
    }
    return in_step(g) ? 0 : 5;
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
}

// Rank 1's arguments of a tiny broadcast were rejected: the root only wrote, and hears of the
// rejection (whose text is only in the entries) at its next call, which completes.
TEST_F(ShmTinyStep, ARejectionReachesATinyBroadcastRootAtItsNextCall) {
  expect_rejection_reaches_broadcast_root_next(1);
}

// Both calls tiny (1 float against 2): the reader fails before reading; the root, which only
// wrote, hears of it at its next call, which completes.
TEST_F(ShmTinyStep, ATinyMismatchIsFoundByBothRanks) {
  const auto out = run_ranks(2, {}, [](Group& g, auto report) {
    float buf[2] = {g.rank() == 0 ? 5.0f : -1.0f, -1.0f};
    const std::string first =
        error_of([&] { broadcast(g, buf, g.rank() == 0 ? 1 : 2, DataType::float32, 0); });
    if (g.rank() == 1 && buf[0] != -1.0f) return 3;  // read from a mismatched call
    std::int32_t one = 1;
    const std::string second = error_of([&] {
      all_reduce(g, &one, &one, 1, DataType::int32, ReduceOp::sum);
    });
    report("first: " + first + " | second: " + second);
    if (one != 2) return 4;  // the reporting call (itself tiny) still completed
    return in_step(g) ? 0 : 5;
  });
  const std::string both =
      "mismatched calls: rank 0 called broadcast(count 1, float32, root 0), rank 1 called "
      "broadcast(count 2, float32, root 0)";
  EXPECT_EQ(out[0].exit_code, 0) << out[0].message;
  EXPECT_THAT(out[0].message, HasSubstr("first:  | second: synk "));
  EXPECT_THAT(out[0].message, HasSubstr(both));
  EXPECT_EQ(out[1].exit_code, 0) << out[1].message;
  EXPECT_THAT(out[1].message, HasSubstr("first: synk "));
  EXPECT_THAT(out[1].message, HasSubstr(both));
  EXPECT_THAT(out[1].message, ::testing::EndsWith("| second: "));
}

// A tiny step against a full one, each way round: the root sends 2 int32 (tiny) and the
// reader expects 3 (a full eager step), then the other way. Every rank names both calls.
TEST_F(ShmTinyStep, ATinyStepAgainstAFullOneIsAMismatch) {
  for (const bool root_tiny : {true, false}) {
    const auto out = run_ranks(2, {}, [root_tiny](Group& g, auto report) {
      std::int32_t buf[3] = {-1, -1, -1};
      const bool tiny = (g.rank() == 0) == root_tiny;
      const std::string first =
          error_of([&] { broadcast(g, buf, tiny ? 2 : 3, DataType::int32, 0); });
      if (g.rank() == 1 && buf[0] != -1) return 3;
      const std::string second = error_of([&] { g.barrier(); });
      report(first + second);
      return in_step(g) ? 0 : 5;
    });
    const std::string both = root_tiny ? "rank 0 called broadcast(count 2, int32, root 0), rank 1 "
                                         "called broadcast(count 3, int32, root 0)"
                                       : "rank 0 called broadcast(count 3, int32, root 0), rank 1 "
                                         "called broadcast(count 2, int32, root 0)";
    for (int r : {0, 1}) {
      EXPECT_EQ(out[r].exit_code, 0) << "root_tiny " << root_tiny << ", rank " << r << ": "
                                     << out[r].message;
      EXPECT_THAT(out[r].message, HasSubstr(both)) << "root_tiny " << root_tiny;
    }
  }
}

// A tiny reduce where rank 2 uses another op: the root reads, so it fails at once; ranks 1 and
// 2 only wrote and report it at their next call. Rank 1 matched the root, so it learns of
// rank 2 only from comparing the compact copies of a step it did not read.
TEST_F(ShmTinyStep, ATinyReduceMismatchReachesTheWritersNext) {
  const auto out = run_ranks(3, {}, [](Group& g, auto report) {
    std::int32_t s = g.rank() + 1, r = -1;
    const ReduceOp op = g.rank() == 2 ? ReduceOp::max : ReduceOp::sum;
    const std::string first = error_of([&] { reduce(g, &s, &r, 1, DataType::int32, op, 0); });
    if (g.rank() == 0 && r != -1) return 3;
    const std::string second = error_of([&] { g.barrier(); });
    report("first: " + first + " | second: " + second);
    return in_step(g) ? 0 : 5;
  });
  const std::string both = "rank 2 called reduce(count 1, int32, max, root 0)";
  EXPECT_EQ(out[0].exit_code, 0) << out[0].message;
  EXPECT_THAT(out[0].message, HasSubstr("first: synk "));
  EXPECT_THAT(out[0].message, HasSubstr(both));
  for (int r : {1, 2}) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
    EXPECT_THAT(out[r].message, HasSubstr("first:  | second: synk "));
    EXPECT_THAT(out[r].message, HasSubstr(both));
  }
}

}  // namespace
}  // namespace synk::shm::testing
