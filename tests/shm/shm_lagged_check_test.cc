// The ranks that do not wait (the root of a broadcast or a small scatter, the non-roots of a
// one-step reduce): they post their part and return, so a mismatch in such a call reaches them
// late. These tests pin down when: the rank that reads finds it at once; the rank that only
// wrote finds it at its next call, which still completes (its result is exact) and then
// throws; nothing is read from a mismatched call, and the ranks stay in step afterwards. Real
// processes (fork_harness.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "fork_harness.h"
#include "step_checks.h"
#include "synk/error.h"

namespace synk::shm::testing {
namespace {

using ::testing::HasSubstr;

// A mismatch between root 0, which only wrote, and rank 1, which read: both ranks' bodies end
// well (exit 0) and report "first: <error of the call> | second: <error of the next call>";
// rank 1's first call failed with `both` (the two calls named), the root's next call did.
void expect_reader_fails_root_reports_next(const std::vector<RankOutcome>& out,
                                           const std::string& both) {
  EXPECT_EQ(out[0].exit_code, 0) << out[0].message;
  EXPECT_THAT(out[0].message, HasSubstr("first:  | second: synk "));
  EXPECT_THAT(out[0].message, HasSubstr(both));
  EXPECT_EQ(out[1].exit_code, 0) << out[1].message;
  EXPECT_THAT(out[1].message, HasSubstr(both));
  EXPECT_THAT(out[1].message, ::testing::EndsWith("| second: "));
}

class ShmLaggedCheck : public NoSegmentLeft<> {};

// Rank 1 expects 20 elements, the root sends 10: rank 1 fails before reading; the root's
// broadcast returns, its next call (an all_reduce) completes and reports the mismatch.
TEST_F(ShmLaggedCheck, ABroadcastRootLearnsOfAMismatchAtItsNextCall) {
  const auto out = run_ranks(2, {}, [](Group& g, auto report) {
    std::vector<float> buf(20, g.rank() == 0 ? 5.0f : -1.0f);
    const std::string first = error_of([&] {
      broadcast(g, buf.data(), g.rank() == 0 ? 10 : 20, DataType::float32, 0);
    });
    if (g.rank() == 1 && buf[0] != -1.0f) return 3;  // read from a mismatched call
    std::vector<float> v(3, 1.0f);
    const std::string second = error_of([&] {
      all_reduce(g, v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    });
    report("first: " + first + " | second: " + second);
    if (v[0] != 2.0f || v[2] != 2.0f) return 4;  // the reporting call still completed
    return in_step(g) ? 0 : 5;
  });
  const std::string both =
      "mismatched calls: rank 0 called broadcast(count 10, float32, root 0), rank 1 called "
      "broadcast(count 20, float32, root 0)";
  expect_reader_fails_root_reports_next(out, both);
  EXPECT_THAT(out[0].message, HasSubstr("reported by this rank's next call, all_reduce"));
  EXPECT_THAT(out[1].message, HasSubstr("| second: "));
}

// Both ranks think they are the root: neither reads, both find out at the next call.
TEST_F(ShmLaggedCheck, TwoRootsOfOneBroadcastBothReportItNext) {
  const auto out = run_ranks(2, {}, [](Group& g, auto report) {
    std::vector<std::int32_t> buf(8, g.rank());
    const std::string first =
        error_of([&] { broadcast(g, buf.data(), buf.size(), DataType::int32, g.rank()); });
    const std::string second = error_of([&] { g.barrier(); });
    report("first: " + first + " | second: " + second);
    if (buf[0] != g.rank()) return 3;
    return in_step(g) ? 0 : 5;
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(out[r].exit_code, 0) << out[r].message;
    EXPECT_THAT(out[r].message, HasSubstr("first:  | second: "));
    EXPECT_THAT(out[r].message,
                HasSubstr("rank 0 called broadcast(count 8, int32, root 0), rank 1 called "
                          "broadcast(count 8, int32, root 1)"));
  }
}

// Rank 1's arguments of a broadcast were rejected (as ShmBackend::reject does); the root only
// writes in that call, so it hears of the rejection at its next call, which completes.
TEST_F(ShmLaggedCheck, ARejectionReachesTheBroadcastRootAtItsNextCall) {
  expect_rejection_reaches_broadcast_root_next(8);
}

// A one-step reduce to root 0 where rank 2 uses another op: the root reads, so it fails at
// once; ranks 1 and 2 only wrote and report it at their next call. 3 ranks: rank 1 matched
// the root, and learns of rank 2 only from the full check.
TEST_F(ShmLaggedCheck, ReduceNonRootsLearnOfAMismatchAtTheirNextCall) {
  const auto out = run_ranks(3, {}, [](Group& g, auto report) {
    std::vector<double> send(16, 1.0), recv(16, -1.0);
    const ReduceOp op = g.rank() == 2 ? ReduceOp::max : ReduceOp::sum;
    const std::string first = error_of([&] {
      reduce(g, send.data(), recv.data(), send.size(), DataType::float64, op, 0);
    });
    if (recv[0] != -1.0) return 3;  // the root reduced a mismatched call
    const std::string second = error_of([&] { g.barrier(); });
    report("first: " + first + " | second: " + second);
    return in_step(g) ? 0 : 5;
  });
  EXPECT_EQ(out[0].exit_code, 0) << out[0].message;
  EXPECT_THAT(out[0].message, HasSubstr("rank 2 called reduce(count 16, float64, max, root 0)"));
  EXPECT_THAT(out[0].message, ::testing::EndsWith("| second: "));
  for (int r : {1, 2}) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
    EXPECT_THAT(out[r].message, HasSubstr("first:  | second: synk "));
    EXPECT_THAT(out[r].message, HasSubstr("rank 2 called reduce(count 16, float64, max, root 0)"));
  }
}

// Many broadcasts and reduces in a row, roots moving, sizes from one step to many, mixed with
// full calls: the non-waiting ranks run ahead, and every byte must still be right (4 ranks on
// 2 cores; small slots for many steps).
TEST_F(ShmLaggedCheck, RunningAheadStaysExact) {
  HarnessOptions opt;
  opt.slot_bytes = 4096;
  const auto out = run_ranks(4, opt, [](Group& g, auto report) {
    const int n = g.size();
    for (int it = 0; it < 300; ++it) {
      const int root = it % n;
      const std::size_t count = it % 7 == 0 ? 3001 : static_cast<std::size_t>(1 + it % 50);
      std::vector<std::int32_t> b(count, g.rank() == root ? it : -1);
      broadcast(g, b.data(), count, DataType::int32, root);
      std::vector<std::int32_t> s(count, g.rank() + it), r(count, -1);
      reduce(g, s.data(), r.data(), count, DataType::int32, ReduceOp::sum, (root + 1) % n);
      const bool bad_b = std::any_of(b.begin(), b.end(), [&](std::int32_t x) { return x != it; });
      const std::int32_t want = n * it + n * (n - 1) / 2;
      const bool bad_r = g.rank() == (root + 1) % n &&
                         std::any_of(r.begin(), r.end(), [&](std::int32_t x) { return x != want; });
      if (bad_b || bad_r) {
        report("wrong at iteration " + std::to_string(it) + (bad_b ? " (broadcast)" : " (reduce)"));
        return 1;
      }
      if (it % 25 == 0 && !in_step(g)) return 2;
    }
    return 0;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
}

// One root broadcasting many times with nothing in between: it runs up to kEagerDepth calls
// ahead of the slowest reader, and every reader must still get every call's own value (a
// reused entry read too early would show an older or newer one). 4 ranks on 2 cores.
TEST_F(ShmLaggedCheck, ALongRunOfBroadcastsFromOneRootIsExact) {
  const auto out = run_ranks(4, {}, [](Group& g, auto report) {
    const int calls = static_cast<int>(Group::kEagerDepth) * 20;
    for (int i = 0; i < calls; ++i) {
      std::int64_t v[4] = {-1, -1, -1, -1};
      if (g.rank() == 2) std::fill(v, v + 4, std::int64_t{1000} * i + 7);
      broadcast(g, v, 4, DataType::int64, 2);
      for (std::int64_t x : v) {
        if (x != std::int64_t{1000} * i + 7) {
          report("call " + std::to_string(i) + ": got " + std::to_string(x));
          return 1;
        }
      }
    }
    return in_step(g) ? 0 : 5;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
}

// The same for reduces: the non-roots run ahead of the root.
TEST_F(ShmLaggedCheck, ALongRunOfReducesToOneRootIsExact) {
  const auto out = run_ranks(3, {}, [](Group& g, auto report) {
    const int calls = static_cast<int>(Group::kEagerDepth) * 20;
    for (int i = 0; i < calls; ++i) {
      std::int32_t send[3] = {i, g.rank(), 1}, recv[3] = {-1, -1, -1};
      reduce(g, send, recv, 3, DataType::int32, ReduceOp::sum, 0);
      if (g.rank() == 0 && (recv[0] != 3 * i || recv[1] != 3 || recv[2] != 3)) {
        report("call " + std::to_string(i) + ": got " + std::to_string(recv[0]));
        return 1;
      }
    }
    return in_step(g) ? 0 : 5;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
}

// A mismatch in the middle of a long run: the reader of that call throws at once; the root,
// which may be far ahead by then, throws within its run (at the end of a later call, which
// completed) or at the all_reduce after it; it throws exactly once, and the ranks stay in step.
TEST_F(ShmLaggedCheck, AMismatchDeepInARunReachesTheRootOnce) {
  const auto out = run_ranks(2, {}, [](Group& g, auto report) {
    const int calls = 200, bad = 150;
    int errors = 0;
    std::string text;
    for (int i = 0; i < calls; ++i) {
      float v[8] = {};
      if (g.rank() == 0) std::fill(v, v + 8, static_cast<float>(i));
      const std::size_t count = g.rank() == 1 && i == bad ? 8 : 4;
      const std::string e = error_of([&] { broadcast(g, v, count, DataType::float32, 0); });
      if (!e.empty()) {
        ++errors;
        text += "[call " + std::to_string(i) + "] " + e;
      }
      if (g.rank() == 1 && i != bad && v[0] != static_cast<float>(i)) return 3;
      if (g.rank() == 1 && i == bad && v[0] != 0.0f) return 4;  // read from the bad call
    }
    std::vector<float> w(2, 1.0f);
    const std::string e = error_of([&] {
      all_reduce(g, w.data(), w.data(), w.size(), DataType::float32, ReduceOp::sum);
    });
    if (!e.empty()) {
      ++errors;
      text += "[all_reduce] " + e;
    }
    report(std::to_string(errors) + " " + text);
    return in_step(g) ? 0 : 5;
  });
  const std::string both =
      "rank 0 called broadcast(count 4, float32, root 0), rank 1 called broadcast(count 8, "
      "float32, root 0)";
  for (int r : {0, 1}) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
    EXPECT_THAT(out[r].message, ::testing::StartsWith("1 ["));
    EXPECT_THAT(out[r].message, HasSubstr(both));
  }
  EXPECT_THAT(out[1].message, ::testing::StartsWith("1 [call 150] "));
}

// Small scatters go through the root's entry: the root writes every block and goes on. Many in
// a row from one root (in place on it every third call), with all_gathers between some: each
// rank must get its own block of each call, never a neighbour's or another call's (4 ranks on
// 2 cores, so the root runs far ahead).
TEST_F(ShmLaggedCheck, ALongRunOfSmallScattersFromOneRootIsExact) {
  const auto out = run_ranks(4, {}, [](Group& g, auto report) {
    const int calls = static_cast<int>(Group::kEagerDepth) * 20, root = 1;
    const std::size_t count = 5, n = static_cast<std::size_t>(g.size());
    const auto value = [](int call, std::size_t rank, std::size_t i) {
      return static_cast<std::int32_t>(call * 1000 + static_cast<int>(rank * 10 + i));
    };
    for (int i = 0; i < calls; ++i) {
      std::vector<std::int32_t> send(n * count, -1), recv(count, -1);
      if (g.rank() == root) {
        for (std::size_t q = 0; q < n; ++q)
          for (std::size_t e = 0; e < count; ++e) send[q * count + e] = value(i, q, e);
      }
      const bool in_place = g.rank() == root && i % 3 == 0;
      std::int32_t* dst = in_place ? send.data() + root * count : recv.data();
      scatter(g, g.rank() == root ? send.data() : nullptr, dst, count, DataType::int32, root);
      for (std::size_t e = 0; e < count; ++e) {
        if (dst[e] != value(i, static_cast<std::size_t>(g.rank()), e)) {
          report("call " + std::to_string(i) + ": element " + std::to_string(e) + " is " +
                 std::to_string(dst[e]));
          return 1;
        }
      }
      if (i % 97 == 0) {
        std::vector<std::int32_t> all(n);
        const std::int32_t mine = g.rank();
        all_gather(g, &mine, all.data(), 1, DataType::int32);
        for (std::size_t q = 0; q < n; ++q)
          if (all[q] != static_cast<std::int32_t>(q)) return 2;
      }
    }
    return in_step(g) ? 0 : 5;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
}

// A small scatter where rank 1 expects 3 elements and the root sends 2: rank 1 fails before
// reading anything; the root, which only wrote, reports it at its next call, which completes.
TEST_F(ShmLaggedCheck, ASmallScatterRootLearnsOfAMismatchAtItsNextCall) {
  const auto out = run_ranks(2, {}, [](Group& g, auto report) {
    std::vector<float> send(6, 5.0f), recv(3, -1.0f);
    const std::string first = error_of([&] {
      scatter(g, g.rank() == 0 ? send.data() : nullptr, recv.data(), g.rank() == 0 ? 2 : 3,
              DataType::float32, 0);
    });
    if (g.rank() == 1 && recv[0] != -1.0f) return 3;  // read from a mismatched call
    std::vector<float> v(3, 1.0f);
    const std::string second = error_of([&] {
      all_reduce(g, v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    });
    report("first: " + first + " | second: " + second);
    if (v[0] != 2.0f || v[2] != 2.0f) return 4;
    return in_step(g) ? 0 : 5;
  });
  const std::string both =
      "mismatched calls: rank 0 called scatter(count 2, float32, root 0), rank 1 called "
      "scatter(count 3, float32, root 0)";
  expect_reader_fails_root_reports_next(out, both);
  EXPECT_THAT(out[1].message, HasSubstr("first: synk "));
}

// The ranks' counts differ so much that they take different paths: the root's 2 x 100 floats go
// through its entry, rank 1's 300 through the slots, or with cross-memory attach on for every
// size (cma_min_bytes 1) through CMA. Either way each posts one step, which the other checks
// before reading anything: rank 1 fails at once, the root at its next call, and they stay in step.
TEST_F(ShmLaggedCheck, AScatterThroughTheEntryAgainstOneThroughTheSlotsOrCmaFailsOnBoth) {
  for (const std::size_t cma_min_bytes : {GroupConfig{}.cma_min_bytes, std::size_t{1}}) {
    SCOPED_TRACE("cma_min_bytes " + std::to_string(cma_min_bytes));
    HarnessOptions opt;
    opt.cma_min_bytes = cma_min_bytes;
    const auto out = run_ranks(2, opt, [](Group& g, auto report) {
      std::vector<float> send(600, 5.0f), recv(300, -1.0f);
      const std::string first = error_of([&] {
        scatter(g, g.rank() == 0 ? send.data() : nullptr, recv.data(), g.rank() == 0 ? 100 : 300,
                DataType::float32, 0);
      });
      if (g.rank() == 1 && recv[0] != -1.0f) return 3;  // read from a mismatched call
      const std::string second = error_of([&] { g.barrier(); });
      report("first: " + first + " | second: " + second);
      return in_step(g) ? 0 : 5;
    });
    const std::string both =
        "rank 0 called scatter(count 100, float32, root 0), rank 1 called scatter(count 300, "
        "float32, root 0)";
    expect_reader_fails_root_reports_next(out, both);
  }
}

}  // namespace
}  // namespace synk::shm::testing
