// synk-bench's #wrong check must see data in the wrong place: a neighbour's block, a rank's
// input lost or counted twice. With inputs 1 + (r + j) % 3, every sum on 3 ranks was 2n and
// every min and max from 3 ranks up was 1 and 3, wherever the data came from: #wrong said 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "bench_check.h"
#include "bench_colls.h"

namespace synk::bench {
namespace {

// Every rank's input of a reduction of `count` floats, filled by the bench's own pattern.
std::vector<std::vector<float>> inputs(Coll c, ReduceOp op, std::size_t count, int n,
                                       std::uint32_t seed = kTimedSeed) {
  std::vector<std::vector<float>> in(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto& v = in[static_cast<std::size_t>(r)];
    v.resize(count);
    std::vector<float> out(count);
    CallArgs a{c, make_layout(c, count * sizeof(float), DataType::float32, n), DataType::float32,
               op, 0, v.data(), out.data()};
    fill_buffers(a, r, n, seed);
  }
  return in;
}

float reduce(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::min: return std::min(a, b);
    case ReduceOp::max: return std::max(a, b);
    case ReduceOp::prod: return a * b;
    default: return a + b;
  }
}

// The true reduction over `ranks` of element j.
float reduced(const std::vector<std::vector<float>>& in, const std::vector<int>& ranks,
              ReduceOp op, std::size_t j) {
  float acc = in[static_cast<std::size_t>(ranks[0])][j];
  for (std::size_t k = 1; k < ranks.size(); ++k) {
    acc = reduce(op, acc, in[static_cast<std::size_t>(ranks[k])][j]);
  }
  return acc;
}

std::uint64_t wrong_in(Coll c, ReduceOp op, std::size_t count, int n, int rank,
                       std::vector<float>& recv, std::uint32_t seed = kTimedSeed) {
  std::vector<float> send(count);
  CallArgs a{c, make_layout(c, count * sizeof(float), DataType::float32, n), DataType::float32,
             op, 0, send.data(), recv.data()};
  return count_wrong(a, rank, n, seed);
}

TEST(BenchCheck, ASumOrMinMaxFromTheWrongPlaceOrRanksIsWrong) {
  for (int n : {3, 4, 6}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max, ReduceOp::prod}) {
      const std::size_t block = 37, count = block * static_cast<std::size_t>(n);
      const auto in = inputs(Coll::allreduce, op, count, n);
      std::vector<int> all(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) all[static_cast<std::size_t>(r)] = r;
      std::vector<float> right(count), shifted(count), lost(count);
      std::vector<int> without_last(all.begin(), all.end() - 1);
      for (std::size_t j = 0; j < count; ++j) {
        right[j] = reduced(in, all, op, j);
        shifted[j] = reduced(in, all, op, (j + block) % count);  // a neighbour's block
        lost[j] = reduced(in, without_last, op, j);              // the last rank's input lost
      }
      SCOPED_TRACE("n " + std::to_string(n) + ", op " + std::to_string(static_cast<int>(op)));
      EXPECT_EQ(wrong_in(Coll::allreduce, op, count, n, 0, right), 0u);
      EXPECT_GT(wrong_in(Coll::allreduce, op, count, n, 0, shifted), count / 4);
      EXPECT_GT(wrong_in(Coll::allreduce, op, count, n, 0, lost), count / 16);
      // reduce_scatter: rank 1 handed rank 0's block.
      std::vector<float> block0(right.begin(), right.begin() + static_cast<long>(block));
      EXPECT_EQ(wrong_in(Coll::reduce_scatter, op, count, n, 0, block0), 0u);
      EXPECT_GT(wrong_in(Coll::reduce_scatter, op, count, n, 1, block0), block / 4);
    }
  }
}

// Another reduction in place of the one asked for: a prod computed as max (each element's
// product came from one rank, the others giving 1, so max equalled it), a min that gives 0 at 64
// ranks (nearly every min of 64 values of 0..15 was 0), a max computed as sum.
TEST(BenchCheck, AnotherReductionIsWrongAtAnyNumberOfRanks) {
  struct Case {
    ReduceOp asked, computed;
  };
  for (int n : {2, 3, 8, 64}) {
    for (Case c : {Case{ReduceOp::prod, ReduceOp::max}, Case{ReduceOp::max, ReduceOp::sum},
                   Case{ReduceOp::min, ReduceOp::prod}, Case{ReduceOp::sum, ReduceOp::max}}) {
      const std::size_t count = 64 * static_cast<std::size_t>(n);
      const auto in = inputs(Coll::allreduce, c.asked, count, n);
      std::vector<int> all(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) all[static_cast<std::size_t>(r)] = r;
      std::vector<float> other(count), zeros(count, 0.0f);
      for (std::size_t j = 0; j < count; ++j) other[j] = reduced(in, all, c.computed, j);
      SCOPED_TRACE("n " + std::to_string(n) + ", op " + std::to_string(static_cast<int>(c.asked)));
      EXPECT_GT(wrong_in(Coll::allreduce, c.asked, count, n, 0, other), count / 4);
      EXPECT_GT(wrong_in(Coll::allreduce, c.asked, count, n, 0, zeros), count / 2);
    }
  }
}

TEST(BenchCheck, BlocksOfAnAllGatherInTheWrongOrderAreWrong) {
  const int n = 3;
  const std::size_t block = 100, count = block * n;
  std::vector<float> recv(count);
  for (int r = 0; r < n; ++r) {
    std::vector<float> mine(block), unused(count);
    CallArgs a{Coll::allgather, make_layout(Coll::allgather, count * sizeof(float),
                                            DataType::float32, n),
               DataType::float32, ReduceOp::sum, 0, mine.data(), unused.data()};
    fill_buffers(a, r, n, kTimedSeed);
    std::copy(mine.begin(), mine.end(), recv.begin() + static_cast<long>(r * block));
  }
  EXPECT_EQ(wrong_in(Coll::allgather, ReduceOp::sum, count, n, 0, recv), 0u);
  std::rotate(recv.begin(), recv.begin() + static_cast<long>(block), recv.end());
  EXPECT_GT(wrong_in(Coll::allgather, ReduceOp::sum, count, n, 0, recv), count / 2);
}

// The checked call gets other inputs than the timed ones: a backend that kept the last timed
// call's result, or replayed it, must fail the check (with one pattern for both, it passed).
TEST(BenchCheck, AResultLeftFromTheTimedCallsIsWrong) {
  const int n = 2;
  const std::size_t block = 64, count = block * n;
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::prod}) {
    const auto in = inputs(Coll::allreduce, op, count, n, kTimedSeed);
    std::vector<float> timed(count);
    for (std::size_t j = 0; j < count; ++j) timed[j] = reduced(in, {0, 1}, op, j);
    SCOPED_TRACE("op " + std::to_string(static_cast<int>(op)));
    EXPECT_EQ(wrong_in(Coll::allreduce, op, count, n, 0, timed, kTimedSeed), 0u);
    EXPECT_GT(wrong_in(Coll::allreduce, op, count, n, 0, timed, kCheckSeed), count / 4);
  }
  std::vector<float> gathered(count);
  for (int r = 0; r < n; ++r) {
    std::vector<float> mine(block), unused(count);
    CallArgs a{Coll::allgather,
               make_layout(Coll::allgather, count * sizeof(float), DataType::float32, n),
               DataType::float32, ReduceOp::sum, 0, mine.data(), unused.data()};
    fill_buffers(a, r, n, kTimedSeed);
    std::copy(mine.begin(), mine.end(), gathered.begin() + static_cast<long>(r * block));
  }
  EXPECT_EQ(wrong_in(Coll::allgather, ReduceOp::sum, count, n, 0, gathered, kTimedSeed), 0u);
  EXPECT_GT(wrong_in(Coll::allgather, ReduceOp::sum, count, n, 0, gathered, kCheckSeed),
            count / 2);
}

// -I 1: each rank's pointers by NCCL's in-place conventions, which synk's calls check (any
// other overlap of send and recv is an error there).
TEST(BenchCheck, InPlacePointersFollowNcclsConventions) {
  std::vector<float> send(64), recv(64);
  const auto at = [](std::vector<float>& v, std::size_t i) { return v.data() + i; };
  const auto args = [&](Coll c, int root) {
    CallArgs a{c, make_layout(c, 64 * sizeof(float), DataType::float32, 4), DataType::float32,
               ReduceOp::sum, root, send.data(), recv.data()};
    a.in_place = true;
    return a;
  };
  const CallArgs out_of_place = [&] {
    CallArgs a = args(Coll::allgather, 0);
    a.in_place = false;
    return a;
  }();
  EXPECT_EQ(placed(out_of_place, 1).send, send.data());
  EXPECT_EQ(placed(args(Coll::allreduce, 0), 2).send, recv.data());
  EXPECT_EQ(placed(args(Coll::reduce, 1), 3).send, recv.data());
  EXPECT_EQ(placed(args(Coll::allgather, 0), 2).send, at(recv, 2 * 16));  // block of 16
  EXPECT_EQ(placed(args(Coll::gather, 1), 1).send, at(recv, 16));
  EXPECT_EQ(placed(args(Coll::gather, 1), 2).send, send.data());           // not the root
  EXPECT_EQ(placed(args(Coll::reduce_scatter, 0), 3).recv, at(send, 3 * 16));
  EXPECT_EQ(placed(args(Coll::scatter, 2), 2).recv, at(send, 2 * 16));
  EXPECT_EQ(placed(args(Coll::scatter, 2), 0).recv, recv.data());
  EXPECT_EQ(placed(args(Coll::broadcast, 0), 1).recv, recv.data());
}

TEST(BenchCheck, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor(Coll::allreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Coll::allgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Coll::reduce_scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Coll::gather, 2), 0.5);  // it was 1
  EXPECT_DOUBLE_EQ(busbw_factor(Coll::scatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Coll::broadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Coll::reduce, 4), 1.0);
}

}  // namespace
}  // namespace synk::bench
