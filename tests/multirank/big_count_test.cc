// More than 2^31 elements in one call (counts are size_t; MPI takes int): an all_reduce and a
// broadcast of 2^31 + 9 bytes on 2 ranks, mpi and shm backends, checked at every element.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mpi_test.h"

namespace {

using synk::DataType;
using synk::ReduceOp;
using synk_test::world;

constexpr std::size_t kCount = (std::size_t{1} << 31) + 9;
constexpr std::size_t kIntMax = static_cast<std::size_t>(INT_MAX);

// The broadcast pattern repeats every 251 bytes, a prime: a chunk of 2^31 - 1 elements that
// landed anywhere but at its offset would show (2^31 - 1 is not a multiple of 251).
constexpr std::size_t kPeriod = 251;
constexpr std::size_t kBlock = kPeriod * 4096;  // ~1 MB, a whole number of periods
std::int8_t pattern(std::size_t i) {
  return static_cast<std::int8_t>(static_cast<int>(i % kPeriod) - 125);
}

class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

void report(const char* what, double s) {
  if (world().rank() != 0) return;
  std::printf("[big_count] %-32s %7.2f s\n", what, s);
  std::fflush(stdout);
}

// Index of the first byte of p[0, n) that differs from the repeating `block`, or n.
std::size_t first_mismatch(const std::uint8_t* p, std::size_t n,
                           const std::vector<std::uint8_t>& block) {
  for (std::size_t off = 0; off < n; off += block.size()) {
    const std::size_t len = std::min(block.size(), n - off);
    if (std::memcmp(p + off, block.data(), len) != 0) {
      for (std::size_t i = 0; i < len; ++i) {
        if (p[off + i] != block[i]) return off + i;
      }
    }
  }
  return n;
}

// One 2.1 GB buffer for every case: first-touch page faults cost more than the collectives.
// The communicator is built per backend: MPI chunks calls at INT_MAX elements, shm steps through
// slots, and both take size_t counts.
class BigCount : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    if (world().size() != 2) return;
    Stopwatch t;
    buf_.reset(new std::uint8_t[kCount]);
    std::memset(buf_.get(), 0, kCount);
    report("allocate and touch", t.seconds());
  }
  static void TearDownTestSuite() { buf_.reset(); }
  void SetUp() override {
    if (world().size() != 2) GTEST_SKIP() << "sized for 2 ranks (2.1 GB each); run with -np 2";
    comm_.emplace(MPI_COMM_WORLD, synk::CommOptions{GetParam()});
    ASSERT_EQ(comm_->backend(), GetParam());
  }
  void TearDown() override { comm_.reset(); }

  static std::unique_ptr<std::uint8_t[]> buf_;
  std::optional<synk::Communicator> comm_;
};
std::unique_ptr<std::uint8_t[]> BigCount::buf_;

TEST_P(BigCount, AllReduceInPlaceOfMoreThan2To31Bytes) {
  synk::Communicator& comm = *comm_;
  std::uint8_t* buf = buf_.get();
  std::memset(buf, 1, kCount);
  Stopwatch t_call;
  comm.all_reduce(buf, buf, kCount, DataType::uint8, ReduceOp::sum);
  comm.barrier();
  report((GetParam() + " all_reduce 2^31+9 uint8").c_str(), t_call.seconds());

  // The chunk boundary (MPI calls of at most INT_MAX elements) and both ends, by name; then all.
  EXPECT_EQ(buf[0], 2);
  EXPECT_EQ(buf[kIntMax - 1], 2) << "last element of the first chunk";
  EXPECT_EQ(buf[kIntMax], 2) << "first element of the second chunk";
  EXPECT_EQ(buf[std::size_t{1} << 31], 2);
  EXPECT_EQ(buf[kCount - 1], 2);
  const std::size_t bad = first_mismatch(buf, kCount, std::vector<std::uint8_t>(1 << 20, 2));
  EXPECT_EQ(bad, kCount) << "rank " << comm.rank() << ": element " << bad << " is "
                         << (bad < kCount ? int{buf[bad]} : -1) << ", expected 2";
}

TEST_P(BigCount, BroadcastOfMoreThan2To31Bytes) {
  synk::Communicator& comm = *comm_;
  std::uint8_t* buf = buf_.get();
  const int root = 1;  // not rank 0, so no default root hides a bug
  std::vector<std::uint8_t> block(kBlock);
  for (std::size_t i = 0; i < kBlock; ++i) block[i] = static_cast<std::uint8_t>(pattern(i));
  if (comm.rank() == root) {
    for (std::size_t off = 0; off < kCount; off += kBlock) {
      std::memcpy(buf + off, block.data(), std::min(kBlock, kCount - off));
    }
  } else {
    std::memset(buf, 0x80, kCount);  // -128: not a pattern value
  }
  Stopwatch t_call;
  comm.broadcast(buf, kCount, DataType::int8, root);
  comm.barrier();
  report((GetParam() + " broadcast 2^31+9 int8").c_str(), t_call.seconds());

  const auto at = [&](std::size_t i) { return static_cast<std::int8_t>(buf[i]); };
  EXPECT_EQ(at(0), pattern(0));
  EXPECT_EQ(at(kIntMax - 1), pattern(kIntMax - 1)) << "last element of the first chunk";
  EXPECT_EQ(at(kIntMax), pattern(kIntMax)) << "first element of the second chunk";
  EXPECT_EQ(at(kCount - 1), pattern(kCount - 1));
  const std::size_t bad = first_mismatch(buf, kCount, block);
  EXPECT_EQ(bad, kCount) << "rank " << comm.rank() << ": element " << bad << " is "
                         << (bad < kCount ? int{at(bad)} : -1) << ", expected "
                         << int{pattern(bad)};
}

std::string backend_name(const ::testing::TestParamInfo<std::string>& p) { return p.param; }

INSTANTIATE_TEST_SUITE_P(Backends, BigCount, ::testing::Values("mpi", "shm"), backend_name);

}  // namespace
