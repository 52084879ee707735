// Helpers for tests that drive a Group through mismatched or running-ahead calls
// (shm_lagged_check_test.cc, shm_tiny_step_test.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "backends/shm/shm_group.h"
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
  g.all_reduce(v.data(), v.data(), v.size(), DataType::int64, ReduceOp::sum);
  const std::int64_t n = g.size();
  return std::all_of(v.begin(), v.end(), [&](std::int64_t x) { return x == n * (n + 1) / 2; });
}

}  // namespace synk::shm::testing
