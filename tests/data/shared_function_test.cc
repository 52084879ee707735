// Shared variables and replicated Functions under mpiexec: collectives on ranks' values of
// different shapes, uneven batch splits, num_slices accumulation per collect mode, and a body
// that fails on one rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <tuple>
#include <utility>
#include <stdexcept>
#include <vector>

#include "../multirank/mpi_test.h"
#include "synk/function.h"
#include "synk/shared.h"

namespace synk {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using synk_test::caught;
using synk_test::message;
using synk_test::world;

TEST(Shared, GatherStacksOrConcatenatesRanksOfDifferentRows) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size();
  // Rank r holds r+1 rows of 2: [r, r], [r, r], ...
  Shared<double> v(comm, "v", std::vector<double>(static_cast<std::size_t>(2 * (r + 1)), r),
                   {static_cast<std::size_t>(r + 1), 2});
  std::vector<std::size_t> shape;
  const std::vector<double> joined = v.gather(0, 0, &shape);
  const std::size_t rows = static_cast<std::size_t>(n * (n + 1) / 2);
  if (r == 0) {
    EXPECT_EQ(shape, (std::vector<std::size_t>{rows, 2}));
    ASSERT_EQ(joined.size(), rows * 2);
    std::size_t i = 0;
    for (int q = 0; q < n; ++q) {
      for (int k = 0; k < 2 * (q + 1); ++k, ++i) EXPECT_EQ(joined[i], q) << i;
    }
  } else {
    EXPECT_TRUE(joined.empty());
  }
  const auto shapes = v.get_shapes();
  ASSERT_EQ(shapes.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(shapes.back()[0], static_cast<std::size_t>(n));
  // Stacking needs one shape: with n > 1 these differ, and every rank says so.
  if (n > 1) {
    const auto e = caught([&] { v.gather(1); });
    EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
    EXPECT_THAT(message(e), HasSubstr("shapes differ"));
  }
}

TEST(Shared, ReduceBroadcastScatterGetSet) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size();
  Shared<float> s(comm, "s", {static_cast<float>(r + 1), 1.0f});
  s.reduce(ReduceOp::sum);  // the root's value only
  if (r == 0) {
    EXPECT_THAT(s.value(), ElementsAre(n * (n + 1) / 2.0f, static_cast<float>(n)));
  } else {
    EXPECT_THAT(s.value(), ElementsAre(r + 1.0f, 1.0f));
  }
  s.all_reduce(ReduceOp::max);  // the root's reduced value is the largest
  EXPECT_THAT(s.value(), ElementsAre(n * (n + 1) / 2.0f, static_cast<float>(n)));
  s.broadcast({5, 6, 7}, {3});
  EXPECT_THAT(s.value(), ElementsAre(5, 6, 7));
  // Scatter 5 rows of 1 along axis 0: linspace shares.
  s.broadcast({0, 1, 2, 3, 4}, {5, 1});
  s.scatter();
  const std::size_t lo = 5 * static_cast<std::size_t>(r) / static_cast<std::size_t>(n);
  const std::size_t hi = 5 * static_cast<std::size_t>(r + 1) / static_cast<std::size_t>(n);
  ASSERT_EQ(s.value().size(), hi - lo);
  for (std::size_t i = 0; i < s.value().size(); ++i) EXPECT_EQ(s.value()[i], static_cast<float>(lo + i));
  s.set_value(n - 1, {42, 43});
  const std::vector<float> last = s.get_value(n - 1);
  EXPECT_THAT(last, ElementsAre(42, 43));
  // A rank out of range is an error on every rank, as in get_value (it did nothing, silently).
  for (int bad : {n, -1}) {
    try {
      s.set_value(bad, {1, 2});
      ADD_FAILURE() << "set_value(" << bad << ") returned";
    } catch (const synk::Error& e) {
      EXPECT_EQ(e.code(), synk::ErrorCode::InvalidArgument);
      EXPECT_THAT(e.what(), HasSubstr("is out of range for"));
    }
  }
  EXPECT_THAT(s.get_value(n - 1), ElementsAre(42, 43));  // unchanged, and still usable
}

// scatter gives each rank only its rows: from the root (rank 1's value, whose other ranks hold
// nothing but their share after it), and straight out of a Data's segment for a Batch (nothing
// travels). Rows of 3 values, 7 rows: shares of rows [7r/n, 7(r+1)/n).
TEST(Shared, ScatterLeavesEachRankOnlyItsRows) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size(), root = n - 1;
  const auto share = [&](std::size_t rows) {
    const auto un = static_cast<std::size_t>(n), ur = static_cast<std::size_t>(r);
    return std::pair<std::size_t, std::size_t>{rows * ur / un, rows * (ur + 1) / un};
  };
  std::vector<float> all(21);
  std::iota(all.begin(), all.end(), 0.0f);
  Shared<float> s(comm, "s");
  if (r == root) s.set_local(all, {7, 3});
  s.scatter(root);
  auto [lo, hi] = share(7);
  EXPECT_EQ(s.shape(), (std::vector<std::size_t>{hi - lo, 3}));
  ASSERT_EQ(s.value().size(), (hi - lo) * 3);
  for (std::size_t i = 0; i < s.value().size(); ++i) EXPECT_EQ(s.value()[i], static_cast<float>(lo * 3 + i));
  // From a Data: all of it, then the odd rows 1, 3, 5 (a strided batch), then indices.
  Data<float> x(comm, {7, 3});
  x.set_value(r == 0 ? all : std::vector<float>{});
  s.scatter(x);
  EXPECT_EQ(s.shape(), (std::vector<std::size_t>{hi - lo, 3}));
  for (std::size_t i = 0; i < s.value().size(); ++i) EXPECT_EQ(s.value()[i], static_cast<float>(lo * 3 + i));
  s.scatter(x, Batch::slice(1, 7, 2));
  std::tie(lo, hi) = share(3);
  ASSERT_EQ(s.value().size(), (hi - lo) * 3);
  for (std::size_t k = lo; k < hi; ++k) {
    EXPECT_EQ(s.value()[(k - lo) * 3], static_cast<float>((1 + 2 * k) * 3)) << "position " << k;
  }
  s.scatter(x, Batch::indices({6, 0}));
  std::tie(lo, hi) = share(2);
  ASSERT_EQ(s.shape()[0], hi - lo);
  // Rows 6 then 0, split: the first share starts with row 6 (values 18...), the last ends with 0.
  if (hi > lo && lo == 0) {
    EXPECT_EQ(s.value()[0], 18.0f);
  }
  if (hi == 2) {
    EXPECT_EQ(s.value()[(hi - lo - 1) * 3], 0.0f);
  }
  // A bad batch is an error on every rank, and nothing changes.
  const std::vector<float> before = s.value();
  const auto e = caught([&] { s.scatter(x, Batch::first(8)); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_EQ(s.value(), before);
}

// weighted_avg multiplies by row counts: an integer or 16-bit output would overflow, so such a
// Function is refused when made. A root whose value() was resized by hand cannot be scattered:
// every rank says so, and nothing changes.
TEST(Shared, WeightedAverageTypesAndAScatterOfABadRootValue) {
  Communicator& comm = world();
  const auto narrow = caught([&] {
    Function<float, std::int32_t> f(comm, "f", {Collect::weighted_avg},
                                    [](const SliceInputs<float, std::int32_t>&) {
                                      return Function<float, std::int32_t>::Outputs{{1}};
                                    });
  });
  EXPECT_SYNK_ERROR(narrow, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(narrow), HasSubstr("weighted_avg needs float or double outputs"));
  // avg of integers: refused when made, where every rank ran the body first and then failed in
  // the collective, and local() truncated 5.5 to 5.
  const auto integer_avg = caught([&] {
    Function<float, std::int32_t> f(comm, "g", {Collect::sum, Collect::avg},
                                    [](const SliceInputs<float, std::int32_t>&) {
                                      return Function<float, std::int32_t>::Outputs{{1}, {1}};
                                    });
  });
  EXPECT_SYNK_ERROR(integer_avg, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(integer_avg), HasSubstr("Function 'g': avg needs floating-point outputs"));
  Shared<float> s(comm, "s", {1, 2, 3, 4}, {2, 2});
  if (comm.rank() == 0) s.value().push_back(5);
  const auto e = caught([&] { s.scatter(); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e), HasSubstr("scatter: the root's 5 values do not fill its shape"));
  EXPECT_EQ(s.value().size(), comm.rank() == 0 ? 5u : 4u);
}

// A value resized by hand on one rank (the last, not the root) cannot be gathered: every rank
// says so, naming it, rather than the root failing alone while the others wait in gatherv.
TEST(Shared, AGatherOfAValueResizedByHandIsAnErrorOnEveryRank) {
  Communicator& comm = world();
  const int last = comm.size() - 1;
  Shared<float> s(comm, "s", {1, 2, 3, 4}, {2, 2});
  if (comm.rank() == last) s.value().push_back(5);
  for (const auto& call : std::vector<std::function<void()>>{[&] { s.gather(); },
                                                             [&] { s.all_gather(); }}) {
    const auto e = caught(call);
    EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
    EXPECT_THAT(message(e), HasSubstr("gather: rank " + std::to_string(last) +
                                      "'s 5 values do not fill its shape of 4"));
  }
  if (comm.rank() == last) s.value().pop_back();
  EXPECT_EQ(s.gather().size(), comm.rank() == 0 ? 4u * comm.size() : 0u);
}

// So can it not be broadcast, or read with get_value: they padded it with zeros (the root's
// [20] of shape {2, 2} came back as [20, 0, 0, 0] on every rank). Nothing changes.
TEST(Shared, ABroadcastOfAValueResizedByHandIsAnErrorOnEveryRank) {
  Communicator& comm = world();
  const int last = comm.size() - 1;
  Shared<float> s(comm, "s", {1, 2, 3, 4}, {2, 2});
  if (comm.rank() == last) s.value().resize(1);
  const auto bcast = caught([&] { s.broadcast(last); });
  EXPECT_SYNK_ERROR(bcast, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(bcast), HasSubstr("broadcast: rank " + std::to_string(last) +
                                        "'s 1 values do not fill its shape of 4"));
  const auto get = caught([&] { s.get_value(last); });
  EXPECT_SYNK_ERROR(get, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(get), HasSubstr("get_value: rank " + std::to_string(last) + "'s 1 values"));
  EXPECT_EQ(s.value().size(), comm.rank() == last ? 1u : 4u);
  if (comm.rank() == last) s.value() = {5, 6, 7, 8};
  s.broadcast(last);
  EXPECT_EQ(s.value(), (std::vector<float>{5, 6, 7, 8}));
}

// A value that does not fill its shape, given on rank 0 to broadcast or set_value: rank 0 threw
// alone and the others waited in the broadcast (on shm until SYNK_TIMEOUT, or they paired it
// with rank 0's next call). Now an error on every rank, nothing changed, and the next call works.
TEST(Shared, ABadShapeOnRankZeroIsAnErrorOnEveryRank) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size();
  Shared<int> s(comm, "s", {r, r});
  const auto bad_broadcast = caught([&] { s.broadcast({1, 2, 3}, {2, 2}); });
  EXPECT_SYNK_ERROR(bad_broadcast, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(bad_broadcast),
              HasSubstr(r == 0 ? "Shared 's': broadcast: 3 values do not fill the shape"
                               : "rank 0: Shared 's': broadcast: 3 values do not fill the shape"));
  EXPECT_THAT(s.value(), ElementsAre(r, r));
  const auto bad_set = caught([&] { s.set_value(n - 1, {1, 2, 3}, {2, 2}); });
  EXPECT_SYNK_ERROR(bad_set, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(bad_set),
              HasSubstr(r == 0 ? "Shared 's': set_value: 3 values do not fill the shape"
                               : "rank 0: Shared 's': set_value: 3 values do not fill the shape"));
  const auto too_many_dims = caught([&] { s.broadcast({1}, std::vector<std::size_t>(9, 1)); });
  EXPECT_SYNK_ERROR(too_many_dims, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(too_many_dims), HasSubstr("a shape of 9 dimensions (at most 8)"));
  EXPECT_THAT(s.value(), ElementsAre(r, r));
  EXPECT_THAT(s.get_value(n - 1), ElementsAre(n - 1, n - 1));
  s.broadcast({7, 8, 9, 10}, {2, 2});
  EXPECT_THAT(s.value(), ElementsAre(7, 8, 9, 10));
  EXPECT_EQ(s.shape(), (std::vector<std::size_t>{2, 2}));
}

// The batch's rows are split unevenly; each rank runs its share in slices; outputs collect by
// mode. Data rows hold their own index, so every expected value is exact.
TEST(Function, UnevenSplitsSlicesAndCollectModes) {
  Communicator& comm = world();
  const int n = comm.size();
  Data<double> x(comm, {11, 1});
  std::vector<double> rows(11);
  std::iota(rows.begin(), rows.end(), 0.0);
  x.set_value(comm.rank() == 0 ? rows : std::vector<double>{});
  int calls = 0;
  Function<double> f(comm, "stats",
                     {Collect::sum, Collect::avg, Collect::max, Collect::gather, Collect::none},
                     [&](const SliceInputs<double>& in) {
                       ++calls;
                       double sum = 0;
                       for (double v : in.data[0].values) sum += v;
                       return Function<double>::Outputs{{sum, static_cast<double>(in.rows)},
                                                        {static_cast<double>(in.rows)},
                                                        {in.rows ? in.data[0].values.back() : -1.0},
                                                        {in.data[0].values.begin(), in.data[0].values.end()},
                                                        {static_cast<double>(in.rows)}};
                     });
  CallOptions o;
  o.batch = Batch::first(10);  // rows 0..9
  o.num_slices = 3;
  const auto out = f({&x}, {}, o);
  EXPECT_EQ(calls, 3);
  const RowSelection mine = o.batch.for_rank(11, comm.rank(), n);
  if (comm.rank() == 0) {
    EXPECT_THAT(out[0], ElementsAre(45.0, 10.0));  // sum over slices and ranks: every row once
    // avg: each rank's mean slice size, then the mean over ranks.
    double expected_avg = 0;
    for (int q = 0; q < n; ++q) {
      expected_avg += static_cast<double>(o.batch.for_rank(11, q, n).size()) / 3.0;
    }
    EXPECT_DOUBLE_EQ(out[1][0], expected_avg / n);
    EXPECT_THAT(out[2], ElementsAre(9.0));
    std::vector<double> all(10);
    std::iota(all.begin(), all.end(), 0.0);
    EXPECT_EQ(out[3], all);  // gather keeps the order of slices and ranks
  }
  double local_rows = 0;
  for (double v : out[4]) local_rows += v;
  EXPECT_EQ(local_rows, static_cast<double>(mine.size()));  // none: this rank's own
}

// weighted_avg: a body that returns its slice's per-row mean gives the exact mean over the
// batch, however the 11 rows split over 1-4 ranks and 1-3 slices (slices of no rows included,
// whose mean is NaN). avg, the equal-weight mean, is biased on such splits.
TEST(Function, WeightedAverageIsTheExactMeanOverTheBatch) {
  Communicator& comm = world();
  const int n = comm.size();
  Data<double> x(comm, {11, 1});
  std::vector<double> squares(11);
  for (std::size_t i = 0; i < squares.size(); ++i) squares[i] = static_cast<double>(i * i);
  x.set_value(comm.rank() == 0 ? squares : std::vector<double>{});
  Function<double> mean(comm, "mean", {Collect::weighted_avg, Collect::avg, Collect::sum},
                        [](const SliceInputs<double>& in) {
                          double sum = 0;
                          for (double v : in.data[0].values) sum += v;
                          const double m = sum / static_cast<double>(in.rows);  // NaN for 0 rows
                          return Function<double>::Outputs{{m, 2 * m}, {in.rows ? m : 0.0},
                                                           {static_cast<double>(in.rows)}};
                        });
  for (int slices = 1; slices <= 3; ++slices) {
    CallOptions o;
    o.num_slices = slices;
    const auto out = mean({&x}, {}, o);
    if (comm.rank() == 0) {
      EXPECT_THAT(out[0], ElementsAre(DoubleEq(35.0), DoubleEq(70.0))) << slices;  // 385 / 11
      EXPECT_EQ(out[2][0], 11.0);
      if (n > 1 && slices == 1) {
        EXPECT_GT(std::abs(out[1][0] - 35.0), 1.0);  // avg is biased
      }
    }
    o.to_all = true;
    EXPECT_THAT(mean({&x}, {}, o)[0], ElementsAre(DoubleEq(35.0), DoubleEq(70.0))) << slices;
  }
  // Rows 1, 4, 9: one row a rank on 3 ranks, and ranks with none on 4.
  CallOptions some;
  some.batch = Batch::slice(1, 4);
  some.num_slices = 2;
  const auto out = mean({&x}, {}, some);
  if (comm.rank() == 0) {
    EXPECT_THAT(out[0], ElementsAre(DoubleEq(14.0 / 3.0), DoubleEq(28.0 / 3.0)));
  }
  // This rank's own: local() and the non-root ranks of a collected call.
  const RowSelection mine = Batch::all().for_rank(11, comm.rank(), n);
  double own = 0;
  for (std::size_t i = 0; i < mine.size(); ++i) own += squares[mine[i]];
  own /= static_cast<double>(mine.size());
  const Batch my_rows = Batch::slice(mine.start, mine.start + mine.size());
  EXPECT_DOUBLE_EQ(mean.local({&x}, {}, my_rows, 3)[0][0], own);
  const auto collected = mean({&x}, {}, CallOptions{});
  if (comm.rank() != 0) {
    EXPECT_DOUBLE_EQ(collected[0][0], own);
  }
}

TEST(Function, ToAllAndLocal) {
  Communicator& comm = world();
  Data<float> x(comm, {4, 2});
  x.set_value(comm.rank() == 0 ? std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4} : std::vector<float>{});
  Function<float> colsum(comm, "colsum", {Collect::sum}, [](const SliceInputs<float>& in) {
    std::vector<float> s(2, 0.0f);
    for (std::size_t r = 0; r < in.rows; ++r) {
      s[0] += in.data[0].values[r * 2];
      s[1] += in.data[0].values[r * 2 + 1] * (*in.inputs)[0][0];
    }
    return Function<float>::Outputs{s};
  });
  CallOptions o;
  o.to_all = true;
  EXPECT_THAT(colsum({&x}, {{10.0f}}, o)[0], ElementsAre(10.0f, 100.0f));
  EXPECT_THAT(colsum.local({&x}, {{1.0f}}, Batch::indices({3, 0}))[0], ElementsAre(5.0f, 5.0f));
}

TEST(Function, ABodyThatThrowsOnOneRankIsAnErrorOnEveryRankNamingIt) {
  Communicator& comm = world();
  Data<float> x(comm, {4, 1});
  x.set_value(comm.rank() == 0 ? std::vector<float>{1, 2, 3, 4} : std::vector<float>{});
  const int bad = comm.size() - 1;
  Function<float> f(comm, "fragile", {Collect::avg}, [&](const SliceInputs<float>&) {
    if (comm.rank() == bad) throw std::runtime_error("out of memory in layer 3");
    return Function<float>::Outputs{{1.0f}};
  });
  const auto e = caught([&] { f({&x}); });
  EXPECT_SYNK_ERROR(e, comm.rank() == bad ? ErrorCode::InvalidUsage : ErrorCode::Remote);
  EXPECT_THAT(message(e), HasSubstr("Function 'fragile': rank " + std::to_string(bad) +
                                    " failed: out of memory in layer 3"));
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// A body that throws something with no message, or not a std::exception: the rank went on as if
// nothing failed (an empty message meant success) or let it escape, and the others waited.
// Every rank now fails, and each failing rank keeps its own error's code.
TEST(Function, EveryKindOfFailureInABodyIsAnErrorOnEveryRank) {
  Communicator& comm = world();
  Data<float> x(comm, {4, 1});
  x.set_value(comm.rank() == 0 ? std::vector<float>{1, 2, 3, 4} : std::vector<float>{});
  const int bad = comm.size() - 1;
  const std::string who = "rank " + std::to_string(bad) + " failed: ";
  for (int kind = 0; kind < 2; ++kind) {
    Function<float> f(comm, "fragile", {Collect::sum}, [&](const SliceInputs<float>&) {
      if (comm.rank() == bad) {
        if (kind == 0) throw std::runtime_error("");
        throw 42;
      }
      return Function<float>::Outputs{{1.0f}};
    });
    const auto e = caught([&] { f({&x}); });
    EXPECT_SYNK_ERROR(e, comm.rank() == bad ? ErrorCode::InvalidUsage : ErrorCode::Remote);
    EXPECT_THAT(message(e), HasSubstr(who + (kind == 0 ? "(an exception with no message)"
                                                       : "an exception that is not a std::exception")));
    EXPECT_TRUE(synk_test::still_usable(comm));
  }
  // A synk::Error keeps its code where it was thrown: an index out of range is InvalidArgument
  // (it became InvalidUsage), on every rank here since every rank's share is out of range.
  Function<float> g(comm, "indexed", {Collect::sum}, [](const SliceInputs<float>& in) {
    return Function<float>::Outputs{{static_cast<float>(in.rows)}};
  });
  CallOptions o;
  o.batch = Batch::indices(std::vector<std::size_t>(static_cast<std::size_t>(comm.size()), 99));
  const auto e = caught([&] { g({&x}, {}, o); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e), HasSubstr("Function 'indexed': rank " + std::to_string(comm.rank()) +
                                    " failed: "));
  EXPECT_THAT(message(e), HasSubstr("99"));
  EXPECT_THAT(message(e), Not(HasSubstr("failed: synk ")));
  // local() checks num_slices as a call does (0 returned nothing; -1 ran the body 2^64-1 times).
  for (int slices : {0, -1}) {
    const auto l = caught([&] { g.local({&x}, {}, Batch::all(), slices); });
    EXPECT_SYNK_ERROR(l, ErrorCode::InvalidArgument);
    EXPECT_THAT(message(l), HasSubstr("num_slices " + std::to_string(slices) + " (at least 1)"));
  }
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// A reduced output whose size differs by rank: each rank's reduce would be another call (an
// error at the root only, the others out of step until a Timeout). Now an error on every rank
// naming the output, and the next call works.
TEST(Function, AReducedOutputOfDifferentSizesByRankIsAnErrorOnEveryRank) {
  Communicator& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs ranks that differ";
  Data<float> x(comm, {4, 1});
  x.set_value(comm.rank() == 0 ? std::vector<float>{1, 2, 3, 4} : std::vector<float>{});
  Function<float> f(comm, "ragged", {Collect::gather, Collect::avg},
                    [&](const SliceInputs<float>&) {
                      const std::size_t n = static_cast<std::size_t>(comm.rank()) + 1;
                      return Function<float>::Outputs{std::vector<float>(n, 1.0f),
                                                      std::vector<float>(n, 2.0f)};
                    });
  const auto e = caught([&] { f({&x}); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(message(e), HasSubstr("Function 'ragged': output 1 has from 1 to " +
                                    std::to_string(comm.size()) + " elements across the ranks"));
  Function<float> even(comm, "even", {Collect::gather, Collect::sum},
                       [&](const SliceInputs<float>&) {
                         const std::size_t n = static_cast<std::size_t>(comm.rank()) + 1;
                         return Function<float>::Outputs{std::vector<float>(n, 1.0f), {1.0f}};
                       });
  CallOptions o;
  o.to_all = true;
  const auto out = even({&x}, {}, o);  // a gathered output may differ in size: fine
  const std::size_t n = static_cast<std::size_t>(comm.size());
  EXPECT_EQ(out[0].size(), n * (n + 1) / 2);
  EXPECT_THAT(out[1], ElementsAre(static_cast<float>(n)));
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// Outputs of avg, sum and weighted_avg of a few values travel with the call's checks in one
// all_reduce; larger ones, and sizes that differ, go the long way. Both give the same answers and
// the same errors, at the root and elsewhere.
TEST(Function, SmallAndLargeOutputsCollectAlikeAndSizesThatDifferAreRefused) {
  Communicator& comm = world();
  const int n = comm.size(), r = comm.rank(), root = n - 1;
  Data<float> x(comm, {4, 1});
  x.set_value(r == 0 ? std::vector<float>{1, 2, 3, 4} : std::vector<float>{});
  for (const std::size_t len : {std::size_t{3}, std::size_t{40}}) {
    Function<float> f(comm, "by_rank", {Collect::sum, Collect::avg},
                      [&](const SliceInputs<float>&) {
                        const float mine = static_cast<float>(r + 1);
                        return Function<float>::Outputs{std::vector<float>(len, mine), {2 * mine}};
                      });
    CallOptions o;
    o.root = root;
    const auto out = f({&x}, {}, o);
    const float sum = static_cast<float>(n * (n + 1) / 2);
    const float own = static_cast<float>(r + 1);
    EXPECT_EQ(out[0], std::vector<float>(len, r == root ? sum : own)) << len;
    EXPECT_THAT(out[1], ElementsAre(r == root ? static_cast<float>(n + 1) : 2 * own)) << len;
    o.to_all = true;
    EXPECT_THAT(f({&x}, {}, o)[1], ElementsAre(static_cast<float>(n + 1))) << len;
  }
  if (n < 2) return;
  for (const std::size_t base : {std::size_t{1}, std::size_t{17}}) {
    Function<double> ragged(comm, "ragged_avg", {Collect::avg}, [&](const SliceInputs<double>&) {
      return Function<double>::Outputs{std::vector<double>(base + static_cast<std::size_t>(r), 1.0)};
    });
    Data<double> y(comm, {2, 1});
    const auto e = caught([&] { ragged({&y}); });
    EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
    EXPECT_THAT(message(e), HasSubstr("Function 'ragged_avg': output 0 has from " +
                                      std::to_string(base) + " to " +
                                      std::to_string(base + static_cast<std::size_t>(n) - 1) +
                                      " elements across the ranks"));
  }
  EXPECT_TRUE(synk_test::still_usable(comm));
}

}  // namespace
}  // namespace synk
