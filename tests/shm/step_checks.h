// Helpers for the tests that drive a Group through mismatched or running-ahead calls
// (shm_lagged_check_test.cc, shm_tiny_step_test.cc), and one check both files run: a
// rejection reaching a broadcast's root, through the entries and through a tiny step.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/shm/shm_group.h"
#include "fork_harness.h"
#include "synk/error.h"

namespace synk::shm::testing {

// Runs fn; returns "" when it completes, else the synk::Error's text (or a note for others).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return std::string(e.what()).empty() ? "(empty error)" : e.what();
  } catch (const std::exception& e) {
    return std::string("not a synk::Error: ") + e.what();
  }
  return "";
}

// After whatever went before, a full call must be exact on every rank: the ranks are in step.
inline bool in_step(Group& g) {
  std::vector<std::int64_t> v(5, g.rank() + 1);
  all_reduce(g, v.data(), v.data(), v.size(), DataType::int64, ReduceOp::sum);
  const std::int64_t n = g.size();
  return std::all_of(v.begin(), v.end(), [&](std::int64_t x) { return x == n * (n + 1) / 2; });
}

// Rank 1's arguments of a broadcast of `count` int32 from root 0 are rejected (as
// ShmBackend::reject does); the root only writes in that call, so it hears of the rejection at
// its next call (a barrier), which completes, and the ranks stay in step.
inline void expect_rejection_reaches_broadcast_root_next(std::size_t count) {
  const std::string text = "broadcast: buf is null but count is " + std::to_string(count);
  const auto out = run_ranks(2, {}, [&](Group& g, auto report) {
    std::vector<std::int32_t> buf(count, 3);
    const std::string first = error_of([&] {
      if (g.rank() == 1) {
        g.reject(detail::Collective::broadcast, ErrorCode::InvalidArgument, text);
      } else {
        broadcast(g, buf.data(), buf.size(), DataType::int32, 0);
      }
    });
    const std::string second = error_of([&] { g.barrier(); });
    report("first: " + first + " | second: " + second);
    return in_step(g) ? 0 : 5;
  });
  EXPECT_EQ(out[0].exit_code, 0) << out[0].message;
  EXPECT_THAT(out[0].message, ::testing::HasSubstr("first:  | second: synk Remote"));
  EXPECT_THAT(out[0].message, ::testing::HasSubstr("rank 1 rejected its arguments: " + text));
  EXPECT_EQ(out[1].exit_code, 0) << out[1].message;
  EXPECT_THAT(out[1].message,
              ::testing::HasSubstr("first: synk InvalidArgument: broadcast: buf is null"));
  EXPECT_THAT(out[1].message, ::testing::EndsWith("| second: "));
}

}  // namespace synk::shm::testing
