// The median every benchmark tool reports, so that their figures mean the same thing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace synk::bench {

// The middle value of v (the mean of the middle two when there is an even number).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace synk::bench
