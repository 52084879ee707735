// The largest and the smallest of some values across the ranks, in one max-reduction that the
// caller makes (over MPI or a Communicator): each value beside its complement, whose largest is
// the complement of the smallest. How synk checks that the ranks passed the same arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace synk::detail {

class Spread {
 public:
  explicit Spread(std::initializer_list<std::uint64_t> values) : Spread(std::span(values)) {}
  explicit Spread(std::span<const std::uint64_t> values) : n_(values.size()), v_(2 * n_) {
    for (std::size_t i = 0; i < n_; ++i) {
      v_[i] = values[i];
      v_[n_ + i] = ~values[i];
    }
  }

  // The 2n unsigned 64-bit values to reduce in place by max across the ranks.
  std::uint64_t* data() { return v_.data(); }
  int size() const { return static_cast<int>(v_.size()); }

  // After the reduction: value i's largest and smallest, and whether every rank had the same.
  std::uint64_t largest(std::size_t i) const { return v_[i]; }
  std::uint64_t smallest(std::size_t i) const { return ~v_[n_ + i]; }
  bool same(std::size_t i) const { return largest(i) == smallest(i); }

 private:
  std::size_t n_;
  std::vector<std::uint64_t> v_;
};

}  // namespace synk::detail
