// Where a step's data goes in the slots (Group::next_slot_step): each use of a slot set puts it
// further along the slot, wrapping around. These tests run long sequences of calls whose sizes
// change from call to call, so that placements of different strides overlap and wrap, and check
// every element of every result exactly (the all_reduces, half of them in place, also reduce
// and copy out their slices in several pieces); and a mismatch in which the ranks place their
// data at different offsets. Real processes (fork_harness.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fork_harness.h"
#include "synk/error.h"

namespace synk::shm::testing {
namespace {

constexpr std::size_t kSlotBytes = 256 * 1024;  // small: places wrap within a few calls

// Element i of rank r's input in call c: small integers, so sums are exact.
std::int32_t value(int r, std::size_t i, int c) {
  return static_cast<std::int32_t>((r + 1) * 3 + (i * 7 + static_cast<std::size_t>(c)) % 101);
}

// The first wrong element as a message, or "".
std::string first_wrong(const char* what, int c, const std::vector<std::int32_t>& got,
                        const std::vector<std::int32_t>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return std::string(what) + " call " + std::to_string(c) + " count " +
             std::to_string(want.size()) + ": element " + std::to_string(i) + " is " +
             std::to_string(got[i]) + ", expected " + std::to_string(want[i]);
    }
  }
  return "";
}

// One call of collective `kind` with `count` elements per rank, checked element by element.
std::string run_and_check(Group& g, int kind, std::size_t count, int c) {
  const int n = g.size();
  const int me = g.rank();
  const std::size_t un = static_cast<std::size_t>(n);
  std::vector<std::int32_t> send(count), recv, want;
  for (std::size_t i = 0; i < count; ++i) send[i] = value(me, i, c);
  auto sum_at = [&](std::size_t i) {
    std::int32_t s = 0;
    for (int r = 0; r < n; ++r) s += value(r, i, c);
    return s;
  };
  switch (kind) {
    case 0: {  // all_reduce, in place every other call
      want.resize(count);
      for (std::size_t i = 0; i < count; ++i) want[i] = sum_at(i);
      if (c % 2) {
        all_reduce(g, send.data(), send.data(), count, DataType::int32, ReduceOp::sum);
        return first_wrong("all_reduce (in place)", c, send, want);
      }
      recv.assign(count, -1);
      all_reduce(g, send.data(), recv.data(), count, DataType::int32, ReduceOp::sum);
      return first_wrong("all_reduce", c, recv, want);
    }
    case 1: {  // broadcast from a root that moves
      const int root = c % n;
      for (std::size_t i = 0; i < count; ++i) send[i] = me == root ? value(root, i, c) : -1;
      want.resize(count);
      for (std::size_t i = 0; i < count; ++i) want[i] = value(root, i, c);
      broadcast(g, send.data(), count, DataType::int32, root);
      return first_wrong("broadcast", c, send, want);
    }
    case 2: {  // reduce to a root that moves
      const int root = c % n;
      recv.assign(count, -1);
      reduce(g, send.data(), recv.data(), count, DataType::int32, ReduceOp::sum, root);
      if (me != root) return "";
      want.resize(count);
      for (std::size_t i = 0; i < count; ++i) want[i] = sum_at(i);
      return first_wrong("reduce", c, recv, want);
    }
    case 3: {  // all_gather
      recv.assign(count * un, -1);
      all_gather(g, send.data(), recv.data(), count, DataType::int32);
      want.resize(count * un);
      for (std::size_t i = 0; i < want.size(); ++i)
        want[i] = value(static_cast<int>(i / count), i % count, c);
      return first_wrong("all_gather", c, recv, want);
    }
    default: {  // reduce_scatter: send holds n blocks of `count`
      send.resize(count * un);
      for (std::size_t i = 0; i < send.size(); ++i) send[i] = value(me, i, c);
      recv.assign(count, -1);
      reduce_scatter(g, send.data(), recv.data(), count, DataType::int32, ReduceOp::sum);
      want.resize(count);
      for (std::size_t i = 0; i < count; ++i)
        want[i] = sum_at(static_cast<std::size_t>(me) * count + i);
      return first_wrong("reduce_scatter", c, recv, want);
    }
  }
}

class ShmPlacement : public NoSegmentLeft<> {};

class ShmPlacementRanks : public ShmPlacement, public ::testing::WithParamInterface<int> {};

std::string ranks_name(const ::testing::TestParamInfo<int>& p) {
  return std::to_string(p.param) + "ranks";
}

// 300 calls, every collective, sizes from one element past the entries (2 KiB) to a few slots,
// drawn from one seed on every rank: strides of 4 KiB to a whole slot meet in each set.
TEST_P(ShmPlacementRanks, CallsOfChangingSizesStayExact) {
  HarnessOptions opt;
  opt.slot_bytes = kSlotBytes;
  const auto out = run_ranks(GetParam(), opt, [](Group& g, auto report) {
    std::mt19937 pick(12345);  // the same sequence of calls on every rank
    std::uniform_int_distribution<std::size_t> count_of(513, 3 * kSlotBytes / 4 + 1000);
    for (int c = 0; c < 300; ++c) {
      const int kind = c % 5;
      std::size_t count = count_of(pick);
      if (kind >= 3) count = count / static_cast<std::size_t>(g.size()) + 1;
      const std::string wrong = run_and_check(g, kind, count, c);
      if (!wrong.empty()) {
        report(wrong);
        return 1;
      }
    }
    return 0;
  });
  for (std::size_t r = 0; r < out.size(); ++r) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
  }
}

// `count` elements of storage (sized count + 2048) starting `offset` bytes past a page's start.
std::int32_t* at_page_offset(std::vector<std::int32_t>& storage, std::size_t offset) {
  const auto base = reinterpret_cast<std::uintptr_t>(storage.data());
  return reinterpret_cast<std::int32_t*>(((base + 4095) & ~std::uintptr_t{4095}) + offset);
}

// A writer puts its data in its slot as far into a page as its source (slot_arena.cc,
// shift_slots), and publishes where; all_reduce's and reduce's shared result area starts as
// far into a page as rank 0's or the root's destination. Here each rank's buffers start at its
// own place in a page (8, 48 and 0 bytes in), so every reader reads a peer's slot, and all but
// one rank the result area, at a place other than its own: broadcast, all_gather, gather,
// all_reduce (in place every other call) and reduce of less than a slot to several stay exact.
// On 3 ranks every reduce goes through the result area (root_reduces_bytes 0).
TEST_P(ShmPlacementRanks, BuffersAtADifferentPageOffsetOnEachRankStayExact) {
  HarnessOptions opt;
  opt.slot_bytes = kSlotBytes;
  opt.root_reduces_bytes = 0;
  const auto out = run_ranks(GetParam(), opt, [](Group& g, auto report) {
    const int n = g.size(), me = g.rank();
    const std::size_t un = static_cast<std::size_t>(n);
    const std::size_t offset = me == 2 ? 0 : 8 + 40 * static_cast<std::size_t>(me);
    const char* names[] = {"broadcast", "all_gather", "gather", "all_reduce", "reduce"};
    int c = 0;
    for (std::size_t count : {std::size_t{1000}, kSlotBytes / 4 + 5, 3 * kSlotBytes / 4 + 1}) {
      for (int kind = 0; kind < 5; ++kind, ++c) {
        std::vector<std::int32_t> send_storage(count + 2048), recv_storage(count * un + 2048);
        std::int32_t* send = at_page_offset(send_storage, offset);
        std::int32_t* recv = at_page_offset(recv_storage, offset);
        const int root = c % n;
        std::vector<std::int32_t> got, want;
        for (std::size_t i = 0; i < count; ++i) send[i] = value(me, i, c);
        std::fill(recv, recv + count * un, -1);
        if (kind == 0) {
          for (std::size_t i = 0; i < count; ++i) send[i] = me == root ? value(root, i, c) : -1;
          broadcast(g, send, count, DataType::int32, root);
          got.assign(send, send + count);
          for (std::size_t i = 0; i < count; ++i) want.push_back(value(root, i, c));
        } else if (kind <= 2) {
          if (kind == 1) {
            all_gather(g, send, recv, count, DataType::int32);
          } else {
            gather(g, send, recv, count, DataType::int32, root);
          }
          if (kind == 1 || me == root) {
            got.assign(recv, recv + count * un);
            for (std::size_t i = 0; i < count * un; ++i)
              want.push_back(value(static_cast<int>(i / count), i % count, c));
          }
        } else {
          std::int32_t* dst = kind == 3 && c % 2 ? send : recv;
          if (kind == 3) {
            all_reduce(g, send, dst, count, DataType::int32, ReduceOp::sum);
          } else {
            reduce(g, send, dst, count, DataType::int32, ReduceOp::sum, root);
          }
          if (kind == 3 || me == root) {
            got.assign(dst, dst + count);
            for (std::size_t i = 0; i < count; ++i) {
              std::int32_t sum = 0;
              for (int r = 0; r < n; ++r) sum += value(r, i, c);
              want.push_back(sum);
            }
          }
        }
        const std::string wrong = first_wrong(names[kind], c, got, want);
        if (!wrong.empty()) return report(wrong + " (buffers " + std::to_string(offset) +
                                          " bytes into a page)"), 1;
      }
    }
    return 0;
  });
  for (std::size_t r = 0; r < out.size(); ++r) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmPlacementRanks, ::testing::Values(2, 3), ranks_name);

// Rank 0 gathers 3,000 elements (12 KiB: a stride of 12 KiB), rank 1 5,000 (20 KiB): each puts
// its data at its own offset. Both must fail naming both calls, read nothing, and stay in step
// for the calls after, which walk the slots again.
TEST_F(ShmPlacement, AMismatchPlacingDataDifferentlyFailsAndTheGroupStaysInStep) {
  HarnessOptions opt;
  opt.slot_bytes = kSlotBytes;
  const auto out = run_ranks(2, opt, [](Group& g, auto report) {
    for (int c = 0; c < 6; ++c) {  // the sets' offsets move on before the mismatch
      const std::string wrong = run_and_check(g, 3, 3000, c);
      if (!wrong.empty()) return report(wrong), 1;
    }
    const std::size_t count = g.rank() == 0 ? 3000 : 5000;
    std::vector<std::int32_t> send(count, 7), recv(2 * count, -1);
    try {
      all_gather(g, send.data(), recv.data(), count, DataType::int32);
      report("the mismatched all_gather returned");
      return 2;
    } catch (const Error& e) {
      report(e.what());
    }
    const std::size_t peer = static_cast<std::size_t>(1 - g.rank());
    for (std::size_t i = peer * count; i < (peer + 1) * count; ++i) {
      if (recv[i] != -1) return report("read the peer's block of a mismatched call"), 3;
    }
    for (int c = 0; c < 20; ++c) {
      const std::string wrong =
          run_and_check(g, c % 5, 3000 + 1000 * static_cast<std::size_t>(c % 3), c);
      if (!wrong.empty()) return report(wrong), 4;
    }
    return 0;
  });
  for (std::size_t r = 0; r < out.size(); ++r) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
    EXPECT_NE(out[r].message.find("rank 0 called all_gather(count 3000, int32)"), std::string::npos)
        << out[r].message;
    EXPECT_NE(out[r].message.find("rank 1 called all_gather(count 5000, int32)"), std::string::npos)
        << out[r].message;
  }
}

}  // namespace
}  // namespace synk::shm::testing
