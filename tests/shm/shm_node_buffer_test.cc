// Node buffers read in place (Group::add_region, Group::offer): all_gather, broadcast and the
// sliced all_reduce and reduce take a rank's data straight from its part of a region that every
// rank has mapped. Real processes (fork_harness.h); the region is a shared mapping the parent
// makes before forking, as Communicator::alloc's segment is one every rank maps. Every result
// is checked element by element, with node buffers on every rank, on some ranks only, and with
// an owner that overwrites its buffer the moment a call returns.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "fork_harness.h"
#include "synk/error.h"

namespace synk::shm::testing {
namespace {

using ::testing::HasSubstr;

constexpr std::size_t kPartBytes = std::size_t{4} << 20;  // each rank's part of the region

// A region of `ranks` parts, shared with the children forked after it is made.
class Region {
 public:
  explicit Region(int ranks) : bytes_(kPartBytes * static_cast<std::size_t>(ranks)) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of the test region failed");
    base_ = static_cast<unsigned char*>(p);
  }
  ~Region() { munmap(base_, bytes_); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // In a child: registers the region with its group (as every rank does, in the same order).
  void add_to(Group& g) const { g.add_region(base_, kPartBytes, kPartBytes, nullptr); }
  // Rank r's part, as int32 elements.
  std::int32_t* part(int r) const {
    return reinterpret_cast<std::int32_t*>(base_ + static_cast<std::size_t>(r) * kPartBytes);
  }

 private:
  std::size_t bytes_;
  unsigned char* base_;
};

// Element i of rank r's input in call c: small integers, so every sum is exact.
std::int32_t value(int r, std::size_t i, int c) {
  return static_cast<std::int32_t>((r + 1) * 5 + (i * 3 + static_cast<std::size_t>(c)) % 97);
}

std::string first_wrong(const std::string& what, const std::int32_t* got,
                        const std::vector<std::int32_t>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return what + " count " + std::to_string(want.size()) + ": element " + std::to_string(i) +
             " is " + std::to_string(got[i]) + ", expected " + std::to_string(want[i]);
    }
  }
  return "";
}

// The calls of one round, with `count` elements per rank; `in_region` says whether this rank's
// buffers are in its part of the region (else in private memory). Returns the first wrong
// element as a message, or "".
std::string run_round(Group& g, const Region& region, bool in_region, std::size_t count, int c) {
  const int n = g.size(), me = g.rank();
  const std::size_t un = static_cast<std::size_t>(n);
  std::vector<std::int32_t> priv(un * count + 1), want;
  std::int32_t* mine = in_region ? region.part(me) : priv.data();
  std::vector<std::int32_t> recv(un * count, -1);
  auto sum_at = [&](std::size_t i) {
    std::int32_t s = 0;
    for (int r = 0; r < n; ++r) s += value(r, i, c);
    return s;
  };

  // all_gather, out of place into private memory.
  for (std::size_t i = 0; i < count; ++i) mine[i] = value(me, i, c);
  all_gather(g, mine, recv.data(), count, DataType::int32);
  want.resize(un * count);
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i)
      want[static_cast<std::size_t>(r) * count + i] = value(r, i, c);
  if (auto w = first_wrong("all_gather", recv.data(), want); !w.empty()) return w;

  // all_gather in place: recv (all blocks) in the part, send is this rank's block of it.
  for (std::size_t i = 0; i < un * count; ++i) mine[i] = -1;
  for (std::size_t i = 0; i < count; ++i)
    mine[static_cast<std::size_t>(me) * count + i] = value(me, i, c);
  all_gather(g, mine + static_cast<std::size_t>(me) * count, mine, count, DataType::int32);
  if (auto w = first_wrong("all_gather (in place)", mine, want); !w.empty()) return w;

  // broadcast from every root.
  for (int root = 0; root < n; ++root) {
    for (std::size_t i = 0; i < count; ++i) mine[i] = me == root ? value(root, i, c) : -1;
    broadcast(g, mine, count, DataType::int32, root);
    want.assign(count, 0);
    for (std::size_t i = 0; i < count; ++i) want[i] = value(root, i, c);
    if (auto w = first_wrong("broadcast from " + std::to_string(root), mine, want); !w.empty())
      return w;
  }

  // all_reduce, out of place and in place.
  want.resize(count);
  for (std::size_t i = 0; i < count; ++i) want[i] = sum_at(i);
  for (std::size_t i = 0; i < count; ++i) mine[i] = value(me, i, c);
  recv.assign(count, -1);
  all_reduce(g, mine, recv.data(), count, DataType::int32, ReduceOp::sum);
  if (auto w = first_wrong("all_reduce", recv.data(), want); !w.empty()) return w;
  all_reduce(g, mine, mine, count, DataType::int32, ReduceOp::sum);
  if (auto w = first_wrong("all_reduce (in place)", mine, want); !w.empty()) return w;

  // reduce to a root that moves (every rank reduces a slice: root_reduces_bytes is 0).
  const int root = c % n;
  for (std::size_t i = 0; i < count; ++i) mine[i] = value(me, i, c);
  recv.assign(count, -1);
  reduce(g, mine, recv.data(), count, DataType::int32, ReduceOp::sum, root);
  if (me == root) {
    if (auto w = first_wrong("reduce", recv.data(), want); !w.empty()) return w;
  }
  return "";
}

class ShmNodeBuffer : public NoSegmentLeft<::testing::TestWithParam<int>> {};

std::string ranks_name(const ::testing::TestParamInfo<int>& info) {
  return std::to_string(info.param) + "ranks";
}

// Counts in the entries (no slot step, nothing offered), in one slot step, and over many
// (64 KiB slots: 100003 int32 take 7 steps of all_gather and all_reduce).
const std::size_t kCounts[] = {7, 3000, 16411, 100003};

void expect_all_exact(const std::vector<RankOutcome>& out) {
  for (std::size_t r = 0; r < out.size(); ++r) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
  }
}

// Two rounds of every count; in_region(rank, round) says where that rank's buffers are.
std::vector<RankOutcome> run_rounds(int ranks, const std::function<bool(int, int)>& in_region) {
  const Region region(ranks);
  HarnessOptions opt;
  opt.root_reduces_bytes = 0;
  opt.store_mode = StoreMode::ordinary;  // streaming ranks copy into their slots instead
  return run_ranks(ranks, opt, [&](Group& g, auto report) {
    region.add_to(g);
    int c = 0;
    for (std::size_t count : kCounts) {
      for (int k = 0; k < 2; ++k, ++c) {
        const std::string w = run_round(g, region, in_region(g.rank(), k), count, c);
        if (!w.empty()) {
          report(w);
          return 1;
        }
      }
    }
    return 0;
  });
}

TEST_P(ShmNodeBuffer, EveryRankInPlaceIsExact) {
  expect_all_exact(run_rounds(GetParam(), [](int, int) { return true; }));
}

// Each reader takes each peer's data from where that peer put it: its part, or its slot.
TEST_P(ShmNodeBuffer, RanksWithAndWithoutNodeBuffersMixAndStayExact) {
  expect_all_exact(run_rounds(GetParam(), [](int rank, int round) { return rank % 2 == round; }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmNodeBuffer, ::testing::Values(2, 3, 4), ranks_name);

HarnessOptions offering() {
  HarnessOptions opt;
  opt.store_mode = StoreMode::ordinary;  // every rank offers (a streaming one would not)
  return opt;
}

// A call whose buffer the others read in place returns only when they are done: the owner
// overwrites it at once, and no reader may see that. all_gather and all_reduce, 400 KB a rank
// (several steps), and broadcast from a root in its part (which the root copies), 200 calls
// each.
TEST(ShmNodeBufferOwner, OverwritingTheBufferAsSoonAsACallReturnsChangesNoResult) {
  const Region region(3);
  constexpr std::size_t kCount = 100003;
  const auto out = run_ranks(3, offering(), [&](Group& g, auto report) {
    region.add_to(g);
    const int me = g.rank();
    std::int32_t* mine = region.part(me);
    std::vector<std::int32_t> recv(3 * kCount), want(kCount);
    for (int c = 0; c < 200; ++c) {
      const int root = c % 3;
      if (me == root) {
        for (std::size_t i = 0; i < kCount; ++i) mine[i] = value(root, i, c);
      }
      broadcast(g, me == root ? mine : recv.data(), kCount, DataType::int32, root);
      if (me == root) {
        std::memset(mine, 0xff, kCount * sizeof(std::int32_t));  // -1 everywhere
        continue;
      }
      for (std::size_t i = 0; i < kCount; ++i) want[i] = value(root, i, c);
      if (auto w = first_wrong("broadcast call " + std::to_string(c), recv.data(), want);
          !w.empty()) {
        report(w);
        return 1;
      }
    }
    std::vector<std::int32_t> all(3 * kCount);
    for (int c = 0; c < 200; ++c) {
      for (std::size_t i = 0; i < kCount; ++i) mine[i] = value(me, i, c);
      all_gather(g, mine, recv.data(), kCount, DataType::int32);
      std::memset(mine, 0xff, kCount * sizeof(std::int32_t));
      for (int r = 0; r < 3; ++r)
        for (std::size_t i = 0; i < kCount; ++i)
          all[static_cast<std::size_t>(r) * kCount + i] = value(r, i, c);
      if (auto w = first_wrong("all_gather call " + std::to_string(c), recv.data(), all);
          !w.empty()) {
        report(w);
        return 1;
      }
    }
    for (int c = 0; c < 200; ++c) {
      for (std::size_t i = 0; i < kCount; ++i) mine[i] = value(me, i, c);
      all_reduce(g, mine, recv.data(), kCount, DataType::int32, ReduceOp::sum);
      std::memset(mine, 0xff, kCount * sizeof(std::int32_t));
      for (std::size_t i = 0; i < kCount; ++i)
        want[i] = value(0, i, c) + value(1, i, c) + value(2, i, c);
      if (auto w = first_wrong("all_reduce call " + std::to_string(c), recv.data(), want);
          !w.empty()) {
        report(w);
        return 1;
      }
    }
    return 0;
  });
  expect_all_exact(out);
}

// Offering changes nothing about the checks: mismatched counts fail on every rank before any
// rank reads another's part, and the group goes on.
TEST(ShmNodeBufferFaults, MismatchedCountsFailOnEveryRankAndTheGroupStaysUsable) {
  const Region region(2);
  const auto out = run_ranks(2, offering(), [&](Group& g, auto report) {
    region.add_to(g);
    std::int32_t* mine = region.part(g.rank());
    std::vector<std::int32_t> recv(2 * 40000, -1);
    try {
      all_gather(g, mine, recv.data(), g.rank() == 0 ? 20000 : 40000, DataType::int32);
      report("no error");
      return 1;
    } catch (const Error& e) {
      if (std::string(e.what()).find("mismatched calls") == std::string::npos) {
        report(std::string("wrong error: ") + e.what());
        return 1;
      }
    }
    for (std::size_t i = 0; i < 20000; ++i) mine[i] = value(g.rank(), i, 1);
    all_gather(g, mine, recv.data(), 20000, DataType::int32);
    for (int r = 0; r < 2; ++r) {
      for (std::size_t i = 0; i < 20000; ++i) {
        if (recv[static_cast<std::size_t>(r) * 20000 + i] != value(r, i, 1)) {
          report("after the mismatch: wrong element " + std::to_string(i) + " of rank " +
                 std::to_string(r));
          return 1;
        }
      }
    }
    return 0;
  });
  expect_all_exact(out);
}

// A rank killed while the others read its part (its memory stays mapped in theirs): they
// wait for it in the closing step and end with an error naming it, not a hang.
TEST(ShmNodeBufferFaults, ARankKilledDuringCallsOnNodeBuffersIsAnErrorOnTheOthers) {
  const Region region(3);
  HarnessOptions opt = offering();
  opt.timeout_s = 30;  // far beyond the detection time: the error must come from liveness
  opt.kill_rank = 1;
  opt.kill_after_ms = 300;
  const auto out = run_ranks(3, opt, [&](Group& g, auto report) {
    region.add_to(g);
    std::int32_t* mine = region.part(g.rank());
    std::vector<std::int32_t> recv(3 * 200000);
    try {
      for (int i = 0; i < 1000000; ++i) {
        all_gather(g, mine, recv.data(), 200000, DataType::int32);
        broadcast(g, mine, 200000, DataType::int32, i % 3);
      }
      report("no error");
      return 1;
    } catch (const Error& e) {
      report(e.what());
      return e.code() == ErrorCode::Remote ? 0 : 1;
    }
  });
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[1].killed);
  for (int r : {0, 2}) {
    EXPECT_EQ(out[static_cast<std::size_t>(r)].exit_code, 0)
        << out[static_cast<std::size_t>(r)].message;
    EXPECT_THAT(out[static_cast<std::size_t>(r)].message, HasSubstr("rank 1"));
    EXPECT_THAT(out[static_cast<std::size_t>(r)].message, HasSubstr("died"));
    EXPECT_LT(out[static_cast<std::size_t>(r)].seconds, 10.0);
  }
}

}  // namespace
}  // namespace synk::shm::testing
