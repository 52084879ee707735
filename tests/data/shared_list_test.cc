// The list collectives of synk/shared_list.h under mpiexec: synk::all_reduce and synk::broadcast
// of lists of Shared variables of mixed dtypes, fused into packs of SYNK_FUSION_BYTES (the
// binary runs under several values of it), with exact expected values, and a list that is wrong
// on one rank as an error on every rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "../multirank/mpi_test.h"
#include "kv/kv_settings.h"
#include "synk/shared.h"
#include "synk/shared_list.h"

namespace synk {
namespace {

using ::testing::HasSubstr;
using synk_test::caught;
using synk_test::message;
using synk_test::still_usable;
using synk_test::world;

std::size_t fusion() { return detail::kv_settings().fusion_bytes; }

// ---- The plan (no communication) ----

TEST(FusedPlan, PacksTinyArraysGreedilyUpToTheFusionSize) {
  std::vector<std::vector<float>> arrays(500, std::vector<float>(3));
  std::vector<SharedRef> list;
  for (auto& a : arrays) list.emplace_back(std::span<float>(a));
  const detail::FusedPlan plan = detail::plan_fused(list, 4096);
  // 12 bytes each: 341 fit in 4096 (4092 bytes), then the other 159.
  ASSERT_EQ(plan.calls.size(), 2u);
  EXPECT_EQ(plan.calls[0].last - plan.calls[0].first, 341u);
  EXPECT_EQ(plan.calls[0].count, 341u * 3);
  EXPECT_EQ(plan.calls[1].count, 159u * 3);
  EXPECT_EQ(plan.pack_bytes, 4092u);
  ASSERT_EQ(plan.order.size(), 500u);
  for (std::size_t i = 0; i < 500; ++i) EXPECT_EQ(plan.order[i], i);  // the list's order
  EXPECT_EQ(detail::plan_fused(list, std::size_t{64} << 20).calls.size(), 1u);
  // 0: every array on its own call, in place.
  const detail::FusedPlan alone = detail::plan_fused(list, 0);
  EXPECT_EQ(alone.calls.size(), 500u);
  EXPECT_EQ(alone.pack_bytes, 0u);
}

// However large the fusion buffer, an array of kAloneBytes or more is not copied into it.
TEST(FusedPlan, ArraysOfTheAloneSizeRunInPlaceUnderAnyFusionSize) {
  std::vector<float> small(16), big(detail::kAloneBytes / sizeof(float)), under(big.size() - 1);
  const std::vector<SharedRef> list{SharedRef(std::span<float>(small)),
                                    SharedRef(std::span<float>(big)),
                                    SharedRef(std::span<float>(under))};
  const detail::FusedPlan plan = detail::plan_fused(list, std::size_t{64} << 20);
  ASSERT_EQ(plan.calls.size(), 2u);
  EXPECT_EQ(plan.calls[0].count, small.size() + under.size());  // packed
  EXPECT_EQ(plan.calls[1].count, big.size());                   // alone, after the pack
  EXPECT_EQ(plan.order, (std::vector<std::size_t>{0, 2, 1}));
}

TEST(FusedPlan, GroupsByDtypeInListOrderAndLeavesLargeArraysInPlace) {
  std::vector<float> f1(10), f2(2000), f3(5), empty;
  std::vector<double> d1(4), d2(6);
  std::vector<std::int32_t> i1(7);
  const std::vector<SharedRef> list{SharedRef(std::span<double>(d1)), SharedRef(std::span<float>(f1)),
                                    SharedRef(std::span<float>(f2)), SharedRef(std::span<float>(empty)),
                                    SharedRef(std::span<std::int32_t>(i1)),
                                    SharedRef(std::span<double>(d2)), SharedRef(std::span<float>(f3))};
  const detail::FusedPlan plan = detail::plan_fused(list, 4096);
  // float64 first (entry 0), then float32, then int32; the 8000-byte float array alone after
  // the float pack; the empty one nowhere.
  ASSERT_EQ(plan.calls.size(), 4u);
  EXPECT_EQ(plan.calls[0].dtype, DataType::float64);
  EXPECT_EQ(plan.calls[0].count, 10u);
  EXPECT_EQ(plan.calls[1].dtype, DataType::float32);
  EXPECT_EQ(plan.calls[1].count, 15u);
  EXPECT_EQ(plan.calls[2].dtype, DataType::float32);
  EXPECT_EQ(plan.calls[2].count, 2000u);
  EXPECT_EQ(plan.calls[2].last - plan.calls[2].first, 1u);
  EXPECT_EQ(plan.calls[3].dtype, DataType::int32);
  EXPECT_EQ(plan.order, (std::vector<std::size_t>{0, 5, 1, 6, 2, 4}));
  EXPECT_EQ(plan.pack_bytes, 80u);
}

// ---- The collectives ----

TEST(SharedList, AllReduceMixedDtypes) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size();
  Shared<float> w1(comm, "w1", {1.0f * (r + 1), 2.0f * (r + 1), 3.0f * (r + 1)});
  Shared<double> b1(comm, "b1", {0.5 * (r + 1), -4.0 * (r + 1)});
  Shared<std::int32_t> steps(comm, "steps", {r + 1, 10 * (r + 1), -(r + 1), 7});
  Shared<float> w2(comm, "w2", std::vector<float>(6, 1.0f * (r + 1)), {2, 3});
  all_reduce(comm, {w1, b1, steps, w2}, ReduceOp::sum);
  const float s = static_cast<float>(n * (n + 1) / 2);
  EXPECT_EQ(w1.value(), (std::vector<float>{s, 2 * s, 3 * s}));
  EXPECT_EQ(b1.value(), (std::vector<double>{0.5 * s, -4.0 * s}));
  const int si = n * (n + 1) / 2;
  EXPECT_EQ(steps.value(), (std::vector<std::int32_t>{si, 10 * si, -si, 7 * n}));
  EXPECT_EQ(w2.value(), std::vector<float>(6, s));
  EXPECT_EQ(w2.shape(), (std::vector<std::size_t>{2, 3}));

  // avg (the default) over the float arrays: rank r holds 2(r+1)k, the mean is (n+1)k.
  Shared<float> a(comm, "a", {2.0f * (r + 1), 4.0f * (r + 1)});
  Shared<double> b(comm, "b", {6.0 * (r + 1)});
  all_reduce(comm, {a, b});
  EXPECT_EQ(a.value(), (std::vector<float>{1.0f * (n + 1), 2.0f * (n + 1)}));
  EXPECT_EQ(b.value(), (std::vector<double>{3.0 * (n + 1)}));
  // min and max too, through a span of SharedRefs built from pointers.
  Shared<std::int32_t> lo(comm, "lo", {r, -r}), hi(comm, "hi", {r, -r});
  const std::vector<SharedRef> los{&lo};
  all_reduce(comm, los, ReduceOp::min);
  all_reduce(comm, std::vector<SharedRef>{&hi}, ReduceOp::max);
  EXPECT_EQ(lo.value(), (std::vector<std::int32_t>{0, -(n - 1)}));
  EXPECT_EQ(hi.value(), (std::vector<std::int32_t>{n - 1, 0}));
}

TEST(SharedList, ManyTinyArraysInSeveralFusedCalls) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size();
  std::deque<Shared<float>> params;  // a deque: the Shareds never move
  std::vector<SharedRef> list;
  for (int i = 0; i < 500; ++i) {
    params.emplace_back(comm, std::to_string(i), std::vector<float>{1.0f * i + r, 2.0f * i, -1.0f * r});
    list.push_back(params.back());
  }
  // Under SYNK_FUSION_BYTES=4096 these 6000 bytes take 2 calls; under 0, 500; by default one.
  const std::size_t calls = detail::plan_fused(list, fusion()).calls.size();
  if (fusion() == 4096) {
    EXPECT_EQ(calls, 2u);
  } else if (fusion() == 0) {
    EXPECT_EQ(calls, 500u);
  }
  all_reduce(comm, list, ReduceOp::sum);
  const float rs = static_cast<float>(n * (n - 1) / 2);  // the sum of the ranks
  for (int i = 0; i < 500; ++i) {
    const std::vector<float> want{1.0f * i * n + rs, 2.0f * i * n, -rs};
    ASSERT_EQ(params[static_cast<std::size_t>(i)].value(), want) << "array " << i;
  }
}

TEST(SharedList, AnArrayLargerThanTheFusionSizeGoesAloneInPlace) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size();
  std::vector<float> big_init(3000);  // 12000 bytes: over 4096
  for (std::size_t i = 0; i < big_init.size(); ++i) big_init[i] = static_cast<float>(i % 97) + r;
  Shared<float> small1(comm, "small1", {1.0f + r}), big(comm, "big", big_init);
  Shared<float> small2(comm, "small2", {2.0f, 3.0f * r});
  Shared<double> big_d(comm, "big_d", std::vector<double>(1000, 1.0 * r));  // 8000 bytes
  const float* where = big.value().data();
  all_reduce(comm, {small1, big, big_d, small2}, ReduceOp::sum);
  const float rs = static_cast<float>(n * (n - 1) / 2);
  EXPECT_EQ(big.value().data(), where);
  EXPECT_EQ(small1.value(), (std::vector<float>{n + rs}));
  EXPECT_EQ(small2.value(), (std::vector<float>{2.0f * n, 3.0f * rs}));
  for (std::size_t i = 0; i < big_init.size(); ++i) {
    ASSERT_EQ(big.value()[i], static_cast<float>(i % 97) * n + rs) << i;
  }
  EXPECT_EQ(big_d.value(), std::vector<double>(1000, rs));
}

TEST(SharedList, BroadcastFromRootOne) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size();
  const int root = n > 1 ? 1 : 0;
  // The same counts everywhere, but different shapes: only the values travel.
  Shared<float> w(comm, "w", std::vector<float>(6, 10.0f * r),
                  r % 2 ? std::vector<std::size_t>{2, 3} : std::vector<std::size_t>{3, 2});
  Shared<double> b(comm, "b", {1.0 * r, 2.0 * r});
  Shared<std::int32_t> k(comm, "k", {r, r, r});
  std::vector<float> big_init(2000, 5.0f * r);  // over 4096 bytes: in place
  Shared<float> big(comm, "big", big_init);
  const std::vector<std::size_t> shape = w.shape();
  broadcast(comm, {w, b, k, big}, root);
  EXPECT_EQ(w.value(), std::vector<float>(6, 10.0f * root));
  EXPECT_EQ(w.shape(), shape);
  EXPECT_EQ(b.value(), (std::vector<double>{1.0 * root, 2.0 * root}));
  EXPECT_EQ(k.value(), (std::vector<std::int32_t>{root, root, root}));
  EXPECT_EQ(big.value(), std::vector<float>(2000, 5.0f * root));
  // Many tiny ones from the last rank.
  std::deque<Shared<std::int32_t>> params;
  std::vector<SharedRef> list;
  for (int i = 0; i < 500; ++i) {
    params.emplace_back(comm, "p", std::vector<std::int32_t>{i, r, -i * r});
    list.push_back(params.back());
  }
  broadcast(comm, list, n - 1);
  for (int i = 0; i < 500; ++i) {
    ASSERT_EQ(params[static_cast<std::size_t>(i)].value(),
              (std::vector<std::int32_t>{i, n - 1, -i * (n - 1)}))
        << i;
  }
}

TEST(SharedList, EmptyListsAndEmptyArrays) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size();
  all_reduce(comm, {});
  broadcast(comm, {});
  all_reduce(comm, std::span<const SharedRef>{}, ReduceOp::sum);
  Shared<float> none(comm, "none"), one(comm, "one", {1.0f * r});
  all_reduce(comm, {none, one}, ReduceOp::sum);
  EXPECT_TRUE(none.value().empty());
  EXPECT_EQ(one.value(), (std::vector<float>{static_cast<float>(n * (n - 1) / 2)}));
  broadcast(comm, {none}, n - 1);
  EXPECT_TRUE(still_usable(comm));
}

// ---- Errors, on every rank ----

TEST(SharedList, NullEntryOnOneRankIsAnErrorOnEveryRank) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size();
  Shared<float> a(comm, "a", {1.0f, 2.0f}), b(comm, "b", {3.0f});
  Shared<float>* maybe = r == n - 1 ? nullptr : &b;
  const auto e = caught([&] { all_reduce(comm, {&a, maybe}, ReduceOp::sum); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e), HasSubstr("entry 1"));
  EXPECT_THAT(message(e), HasSubstr("null"));
  if (r != n - 1) {
    EXPECT_THAT(message(e), HasSubstr("rank " + std::to_string(n - 1) + ": entry 1 is null"));
  }
  EXPECT_EQ(a.value(), (std::vector<float>{1.0f, 2.0f}));  // nothing changed
  const auto e2 = caught([&] { broadcast(comm, {a, SharedRef{}}, 0); });
  EXPECT_SYNK_ERROR(e2, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e2), HasSubstr("broadcast(list): entry 1 is null"));
  EXPECT_TRUE(still_usable(comm));
}

TEST(SharedList, SizeMismatchIsAnErrorOnEveryRankNamingTheEntry) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  Shared<float> a(comm, "a", {1.0f}), b(comm, "b", {2.0f});
  Shared<float> c(comm, "c", std::vector<float>(r == 0 ? 5 : 4, 1.0f));
  const auto e = caught([&] { all_reduce(comm, {a, b, c}, ReduceOp::sum); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(message(e), HasSubstr("entry 2 ('c') differs between the ranks"));
  EXPECT_THAT(message(e), HasSubstr("from 4 to 5"));
  EXPECT_EQ(a.value(), (std::vector<float>{1.0f}));
  // A dtype that differs, in a broadcast.
  Shared<float> f(comm, "x", {1.0f});
  Shared<std::int32_t> i(comm, "x", {1});
  const auto e2 = caught([&] {
    if (r == 1) {
      broadcast(comm, {a, i});
    } else {
      broadcast(comm, {a, f});
    }
  });
  EXPECT_SYNK_ERROR(e2, ErrorCode::InvalidUsage);
  EXPECT_THAT(message(e2), HasSubstr("entry 1 ('x') differs"));
  // Lists of different lengths; swapped sizes (the same total).
  const auto e3 = caught([&] {
    if (r == 0) {
      all_reduce(comm, {a, b}, ReduceOp::sum);
    } else {
      all_reduce(comm, {a}, ReduceOp::sum);
    }
  });
  EXPECT_SYNK_ERROR(e3, ErrorCode::InvalidUsage);
  EXPECT_THAT(message(e3), HasSubstr("different lengths"));
  Shared<float> p(comm, "p", std::vector<float>(r == 0 ? 2 : 3)), q(comm, "q", std::vector<float>(r == 0 ? 3 : 2));
  const auto e4 = caught([&] { all_reduce(comm, {p, q}, ReduceOp::sum); });
  EXPECT_SYNK_ERROR(e4, ErrorCode::InvalidUsage);
  EXPECT_THAT(message(e4), HasSubstr("entry 0 ('p') differs"));
  EXPECT_TRUE(still_usable(comm));
}

TEST(SharedList, BadArgumentsAreErrorsOnEveryRank) {
  Communicator& comm = world();
  const int r = comm.rank(), n = comm.size();
  Shared<float> a(comm, "a", {1.0f});
  Shared<std::int32_t> k(comm, "k", {r});
  // avg (the default) on an integer array: nothing changes, not even the float array.
  const auto e = caught([&] { all_reduce(comm, {a, k}); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e), HasSubstr("entry 1 ('k')"));
  EXPECT_THAT(message(e), HasSubstr("avg"));
  EXPECT_EQ(a.value(), (std::vector<float>{1.0f}));
  EXPECT_EQ(k.value(), (std::vector<std::int32_t>{r}));
  // One array twice.
  const auto e2 = caught([&] { all_reduce(comm, {a, k, a}, ReduceOp::sum); });
  EXPECT_SYNK_ERROR(e2, ErrorCode::InvalidUsage);
  EXPECT_THAT(message(e2), HasSubstr("entry 2 ('a') overlaps entry 0 ('a')"));
  // A root out of range (on every rank), and on one rank only.
  const auto e3 = caught([&] { broadcast(comm, {a}, n); });
  EXPECT_SYNK_ERROR(e3, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e3), HasSubstr("out of range"));
  const auto e4 = caught([&] { broadcast(comm, {a}, r == 0 ? -1 : 0); });
  EXPECT_SYNK_ERROR(e4, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e4), HasSubstr(r == 0 ? "root -1 is out of range" : "rank 0: the root"));
  // Different ops.
  if (n > 1) {
    const auto e5 = caught([&] { all_reduce(comm, {a}, r == 0 ? ReduceOp::sum : ReduceOp::max); });
    EXPECT_SYNK_ERROR(e5, ErrorCode::InvalidUsage);
    EXPECT_THAT(message(e5), HasSubstr("different ops"));
  }
  EXPECT_TRUE(still_usable(comm));
}

}  // namespace
}  // namespace synk
