// Shared pieces of the multi-rank tests: the world communicator a test binary uses, typed access
// to buffers of any synk::DataType (so one test body covers all twelve), and error capture.
#pragma once

#include <gtest/gtest.h>
#include <synk/synk.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace synk_test {

// The communicator over MPI_COMM_WORLD, created on first use. The test main destroys it before
// MPI_Finalize; making one per test would add a collective bootstrap to each of thousands.
synk::Communicator& world();

inline bool is_signed(synk::DataType t) {
  using synk::DataType;
  return t != DataType::uint8 && t != DataType::uint16 && t != DataType::uint32 &&
         t != DataType::uint64;
}

template <class T>
constexpr bool kIsHalf = std::is_same_v<T, synk::float16> || std::is_same_v<T, synk::bfloat16>;

// Conversions used only on values the type holds exactly (small integers) or that the test
// rounds on purpose (avg in 16-bit types: one rounding, like the library).
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, synk::float16>) {
    return synk::to_float16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, synk::bfloat16>) {
    return synk::to_bfloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <class T>
double to_double(T v) {
  if constexpr (kIsHalf<T>) {
    return static_cast<double>(synk::to_float(v));
  } else {
    return static_cast<double>(v);
  }
}

// Outside every value the tests produce ([-50, 99]), and exact in int8 and bfloat16.
inline constexpr double kGuard = 123;     // the elements around a buffer
inline constexpr double kSentinel = 111;  // what a receive buffer holds before the call

// n elements of one DataType between guard elements, so writes past either end show up.
class Buffer {
 public:
  static constexpr std::size_t kGuardElems = 16;

  Buffer(synk::DataType t, std::size_t n) : t_(t), n_(n), es_(synk::size_of(t)) {
    storage_.resize(((n + 2 * kGuardElems) * es_ + 7) / 8);
    synk::visit_type(t_, [&](auto tag) {
      using T = decltype(tag);
      T* p = reinterpret_cast<T*>(storage_.data());
      const T g = from_double<T>(kGuard);
      for (std::size_t i = 0; i < kGuardElems; ++i) p[i] = p[kGuardElems + n_ + i] = g;
    });
  }

  std::size_t size() const { return n_; }
  void* data() { return at(0); }
  const void* data() const { return const_cast<Buffer*>(this)->at(0); }
  void* at(std::size_t i) {  // element i; i == size() is the end
    return reinterpret_cast<unsigned char*>(storage_.data()) + (kGuardElems + i) * es_;
  }

  // Element i = value(i), for i in [from, to).
  template <class Fn>
  void fill(Fn&& value, std::size_t from = 0, std::size_t to = SIZE_MAX) {
    to = std::min(to, n_);
    synk::visit_type(t_, [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(data());
      for (std::size_t i = from; i < to; ++i) p[i] = from_double<T>(value(i));
    });
  }
  void fill_value(double v) {
    fill([v](std::size_t) { return v; });
  }

  // Every element equals expected(i) (rounded to the type for floating types) and the guards
  // are intact. On a mismatch: the first wrong index, both values, how many are wrong, and `what`.
  template <class Fn>
  ::testing::AssertionResult check(Fn&& expected, const std::string& what) const {
    return synk::visit_type(t_, [&](auto tag) -> ::testing::AssertionResult {
      using T = decltype(tag);
      const T* p = static_cast<const T*>(data());
      const T* g = p - kGuardElems;
      for (std::size_t i = 0; i < kGuardElems; ++i) {
        if (to_double(g[i]) != kGuard || to_double(p[n_ + i]) != kGuard) {
          return ::testing::AssertionFailure()
                 << what << ": a guard element around the " << n_
                 << "-element buffer was overwritten (write out of bounds)";
        }
      }
      std::size_t wrong = 0, first = 0;
      double first_got = 0, first_want = 0;
      for (std::size_t i = 0; i < n_; ++i) {
        double want = expected(i);
        if constexpr (!std::is_integral_v<T>) want = to_double(from_double<T>(want));
        const double got = to_double(p[i]);
        if (got != want) {
          if (wrong++ == 0) {
            first = i;
            first_got = got;
            first_want = want;
          }
        }
      }
      if (wrong == 0) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure()
             << what << ": element " << first << " is " << first_got << ", expected " << first_want
             << " (" << wrong << " of " << n_ << " elements wrong)";
    });
  }

 private:
  synk::DataType t_;
  std::size_t n_;
  std::size_t es_;
  std::vector<std::uint64_t> storage_;  // 8-byte aligned for every element type
};

// The synk::Error fn throws, or nothing (any other exception propagates to gtest).
template <class Fn>
std::optional<synk::Error> caught(Fn&& fn) {
  try {
    fn();
  } catch (const synk::Error& e) {
    return e;
  }
  return std::nullopt;
}

// EXPECT that `error` (a std::optional<synk::Error>) holds `expected_code`. Non-fatal on
// purpose: a rank that returned early would skip the collectives the others make.
#define EXPECT_SYNK_ERROR(error, expected_code)                                               \
  do {                                                                                        \
    EXPECT_TRUE((error).has_value())                                                          \
        << "rank " << synk_test::world().rank() << ": no synk::Error";                        \
    if ((error).has_value()) {                                                                \
      EXPECT_EQ((error)->code(), (expected_code))                                             \
          << "rank " << synk_test::world().rank() << ": " << synk::to_string((error)->code()) \
          << ": " << (error)->what();                                                         \
    }                                                                                         \
  } while (0)

// The error's message, or a placeholder that no HasSubstr matches when there was none.
inline std::string message(const std::optional<synk::Error>& e) {
  return e ? e->what() : "(no synk::Error was thrown)";
}

// Proves a communicator still works after an error: an exact all_reduce of rank + 1.
inline ::testing::AssertionResult still_usable(synk::Communicator& comm) {
  std::vector<std::int64_t> v(3, comm.rank() + 1);
  comm.all_reduce(v);
  const std::int64_t n = comm.size(), want = n * (n + 1) / 2;
  for (std::int64_t x : v) {
    if (x != want) {
      return ::testing::AssertionFailure()
             << "rank " << comm.rank() << ": all_reduce after the error gave " << x << ", expected "
             << want;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace synk_test
