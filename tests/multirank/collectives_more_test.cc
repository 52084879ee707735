// The rest of the collectives grid (linked into the same binary, so the chunked runs cover it):
// gatherv, scatterv and all_to_allv with rank-dependent sizes, avg on integer types, null
// buffers at count 0, the typed helpers (all_to_all's among them), barrier.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <span>
#include <thread>
#include <tuple>
#include <vector>

#include "grid.h"
#include "mpi_test.h"

namespace {

using synk::DataType;
using synk::ReduceOp;
using synk_test::Buffer;
using synk_test::data;
using synk_test::kAllTypes;
using synk_test::kSentinel;
using synk_test::max_count;
using synk_test::Root;
using synk_test::root_of;
using synk_test::world;
using ::testing::HasSubstr;

// ---- gatherv ----------------------------------------------------------------------------------

// How many elements each rank sends: a ramp, a ramp with zeros (ranks 0, 2, ...: the root sends
// nothing when it is rank 0), and steps of 1500 that cross SYNK_MPI_MAX_CHUNK=1000.
enum class Sizes { ramp, with_zeros, steps };

struct VCase {
  DataType dtype;
  Sizes sizes;
  Root root;
  bool in_place;  // at the root; off the root, recv is null and recv_counts empty
};

std::size_t v_count(Sizes s, int r) {
  const auto ur = static_cast<std::size_t>(r);
  switch (s) {
    case Sizes::ramp:
      return ur * 3 + 1;
    case Sizes::with_zeros:
      return r % 2 == 0 ? 0 : ur * 3 + 1;
    case Sizes::steps:
      return ur * 1500 + 1;
  }
  return 0;
}

class Gatherv : public ::testing::TestWithParam<VCase> {};

TEST_P(Gatherv, RankDependentSizes) {
  const VCase& c = GetParam();
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size(), root = root_of(c.root, n);
  if (c.root == Root::last && n == 1) GTEST_SKIP() << "root size-1 is root 0";
  std::vector<std::size_t> counts, displs;
  std::vector<double> expected;
  for (int r = 0; r < n; ++r) {
    counts.push_back(v_count(c.sizes, r));
    displs.push_back(expected.size());
    for (std::size_t j = 0; j < counts.back(); ++j) expected.push_back(data(r, j));
  }
  const std::size_t mine_n = counts[static_cast<std::size_t>(me)];
  const std::size_t mine_at = displs[static_cast<std::size_t>(me)];
  const auto mine = [&](std::size_t j) { return data(me, j); };
  const std::string where = "rank " + std::to_string(me) + " of " + std::to_string(n) +
                            ", gatherv " + synk::to_string(c.dtype) + " root " +
                            std::to_string(root) + (c.in_place ? " inplace" : " outofplace");
  Buffer send(c.dtype, mine_n);
  send.fill(mine);
  if (me == root) {
    Buffer recv(c.dtype, expected.size());
    recv.fill_value(kSentinel);
    if (c.in_place) {
      recv.fill([&](std::size_t k) { return data(me, k - mine_at); }, mine_at, mine_at + mine_n);
      comm.gatherv(recv.at(mine_at), mine_n, recv.data(), counts, c.dtype, root);
    } else {
      comm.gatherv(send.data(), mine_n, recv.data(), counts, c.dtype, root);
    }
    EXPECT_TRUE(recv.check([&](std::size_t k) { return expected[k]; }, where + ", recv"));
  } else if (c.in_place) {
    comm.gatherv(send.data(), mine_n, nullptr, {}, c.dtype, root);
  } else {
    Buffer recv(c.dtype, expected.size());
    recv.fill_value(kSentinel);
    comm.gatherv(send.data(), mine_n, recv.data(), counts, c.dtype, root);
    EXPECT_TRUE(recv.check([](std::size_t) { return kSentinel; },
                           where + ", recv off the root (must not change)"));
  }
  EXPECT_TRUE(send.check(mine, where + ", send (must not change)"));
}

std::vector<VCase> gatherv_cases() {
  std::vector<VCase> out;
  for (DataType t : kAllTypes) {
    for (Sizes s : {Sizes::ramp, Sizes::with_zeros, Sizes::steps}) {
      if (v_count(s, 3) > max_count()) continue;  // the largest count of a 4-rank run
      for (Root root : {Root::first, Root::last}) {
        for (bool in_place : {false, true}) out.push_back({t, s, root, in_place});
      }
    }
  }
  return out;
}

std::string gatherv_name(const ::testing::TestParamInfo<VCase>& info) {
  const VCase& c = info.param;
  const char* sizes = c.sizes == Sizes::ramp    ? "ramp"
                      : c.sizes == Sizes::steps ? "steps1500"
                                                : "withzeros";
  return std::string(synk::to_string(c.dtype)) + "_" + sizes +
         (c.root == Root::last ? "_rootlast" : "_root0") +
         (c.in_place ? "_inplace" : "_outofplace");
}

void PrintTo(const VCase& c, std::ostream* os) { *os << gatherv_name({c, 0}); }

INSTANTIATE_TEST_SUITE_P(Grid, Gatherv, ::testing::ValuesIn(gatherv_cases()), gatherv_name);

// ---- scatterv ---------------------------------------------------------------------------------

// gatherv's mirror: the root's send holds every rank's block one after another; rank r
// receives v_count(r) elements of data(r, j). In place at the root, recv is its own block.
class Scatterv : public ::testing::TestWithParam<VCase> {};

TEST_P(Scatterv, RankDependentSizes) {
  const VCase& c = GetParam();
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size(), root = root_of(c.root, n);
  if (c.root == Root::last && n == 1) GTEST_SKIP() << "root size-1 is root 0";
  std::vector<std::size_t> counts, displs;
  std::vector<double> all;
  for (int r = 0; r < n; ++r) {
    counts.push_back(v_count(c.sizes, r));
    displs.push_back(all.size());
    for (std::size_t j = 0; j < counts.back(); ++j) all.push_back(data(r, j));
  }
  const std::size_t mine_n = counts[static_cast<std::size_t>(me)];
  const std::size_t mine_at = displs[static_cast<std::size_t>(me)];
  const auto mine = [&](std::size_t j) { return data(me, j); };
  const std::string where = "rank " + std::to_string(me) + " of " + std::to_string(n) +
                            ", scatterv " + synk::to_string(c.dtype) + " root " +
                            std::to_string(root) + (c.in_place ? " inplace" : " outofplace");
  if (me == root) {
    Buffer send(c.dtype, all.size());
    send.fill([&](std::size_t k) { return all[k]; });
    if (c.in_place) {
      comm.scatterv(send.data(), counts, send.at(mine_at), mine_n, c.dtype, root);
    } else {
      Buffer recv(c.dtype, mine_n);
      recv.fill_value(kSentinel);
      comm.scatterv(send.data(), counts, recv.data(), mine_n, c.dtype, root);
      EXPECT_TRUE(recv.check(mine, where + ", recv"));
    }
    EXPECT_TRUE(send.check([&](std::size_t k) { return all[k]; }, where + ", send (must not change)"));
    return;
  }
  Buffer recv(c.dtype, mine_n);
  recv.fill_value(kSentinel);
  if (c.in_place) {
    comm.scatterv(nullptr, {}, recv.data(), mine_n, c.dtype, root);
  } else {
    Buffer send(c.dtype, all.size());
    send.fill_value(kSentinel);
    comm.scatterv(send.data(), counts, recv.data(), mine_n, c.dtype, root);
  }
  EXPECT_TRUE(recv.check(mine, where + ", recv"));
}

INSTANTIATE_TEST_SUITE_P(Grid, Scatterv, ::testing::ValuesIn(gatherv_cases()), gatherv_name);

// ---- all_to_allv -------------------------------------------------------------------------------

// How many elements rank r sends rank q: a ramp, a ramp with zeros (half the pairs, every own
// block among them), and steps of 700 that cross SYNK_MPI_MAX_CHUNK=1000 and the
// smallest slot's steps. Block (r, q) holds data(r * n + q, j).
std::size_t pair_count(Sizes s, int r, int q) {
  const auto ur = static_cast<std::size_t>(r), uq = static_cast<std::size_t>(q);
  switch (s) {
    case Sizes::ramp:
      return (ur * 3 + uq * 5) % 7 + 1;
    case Sizes::with_zeros:
      return (r + q) % 2 == 0 ? 0 : ur * 3 + uq + 1;
    case Sizes::steps:
      return (ur + uq) * 700 + 1;
  }
  return 0;
}

class AllToAllv : public ::testing::TestWithParam<std::tuple<DataType, Sizes, bool>> {};

TEST_P(AllToAllv, PairDependentSizes) {
  const auto [dtype, sizes, nonblocking] = GetParam();
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size();
  std::vector<std::size_t> send_counts, recv_counts;
  std::vector<double> sent, received;
  for (int q = 0; q < n; ++q) {
    send_counts.push_back(pair_count(sizes, me, q));
    recv_counts.push_back(pair_count(sizes, q, me));
    for (std::size_t j = 0; j < send_counts.back(); ++j) sent.push_back(data(me * n + q, j));
    for (std::size_t j = 0; j < recv_counts.back(); ++j) received.push_back(data(q * n + me, j));
  }
  const std::string where = "rank " + std::to_string(me) + " of " + std::to_string(n) +
                            ", all_to_allv " + synk::to_string(dtype);
  Buffer send(dtype, sent.size()), recv(dtype, received.size());
  send.fill([&](std::size_t k) { return sent[k]; });
  recv.fill_value(kSentinel);
  if (nonblocking) {
    comm.iall_to_allv(send.data(), send_counts, recv.data(), recv_counts, dtype).wait();
  } else {
    comm.all_to_allv(send.data(), send_counts, recv.data(), recv_counts, dtype);
  }
  EXPECT_TRUE(recv.check([&](std::size_t k) { return received[k]; }, where + ", recv"));
  EXPECT_TRUE(send.check([&](std::size_t k) { return sent[k]; }, where + ", send (unchanged)"));
}

std::vector<std::tuple<DataType, Sizes, bool>> all_to_allv_cases() {
  std::vector<std::tuple<DataType, Sizes, bool>> out;
  for (DataType t : kAllTypes) {
    for (Sizes s : {Sizes::ramp, Sizes::with_zeros, Sizes::steps}) {
      if (pair_count(s, 3, 3) > max_count()) continue;  // the largest count of a 4-rank run
      for (bool nonblocking : {false, true}) out.emplace_back(t, s, nonblocking);
    }
  }
  return out;
}

std::string all_to_allv_name(
    const ::testing::TestParamInfo<std::tuple<DataType, Sizes, bool>>& info) {
  const auto [t, s, nonblocking] = info.param;
  const char* sizes = s == Sizes::ramp ? "ramp" : s == Sizes::steps ? "steps700" : "withzeros";
  return std::string(synk::to_string(t)) + "_" + sizes + (nonblocking ? "_nonblocking" : "");
}

INSTANTIATE_TEST_SUITE_P(Grid, AllToAllv, ::testing::ValuesIn(all_to_allv_cases()),
                         all_to_allv_name);

// Rank 1's recv_counts[0] is one more than rank 0 sends it: every rank fails alike where the
// backend compares (shm's counts step, hier's and SYNK_CHECK_CALLS's comparison).
TEST(AllToAllvCounts, ThatDisagreeFailEveryRankAlike) {
  synk::Communicator& comm = world();
  const char* checked = std::getenv("SYNK_CHECK_CALLS");
  const bool compares = comm.backend() != "mpi" || (checked && std::string(checked) == "1");
  if (comm.size() < 2 || !compares) GTEST_SKIP() << "needs 2 ranks and a backend that compares";
  const auto un = static_cast<std::size_t>(comm.size());
  std::vector<std::size_t> send_counts(un, 2), recv_counts(un, 2);
  if (comm.rank() == 1) recv_counts[0] = 3;
  std::vector<float> send(2 * un, 1.0f), recv(2 * un + 1, 0.0f);
  try {
    comm.all_to_allv(send.data(), send_counts, recv.data(), recv_counts, DataType::float32);
    ADD_FAILURE() << "counts that disagree were taken";
  } catch (const synk::Error& e) {
    EXPECT_EQ(e.code(), synk::ErrorCode::InvalidUsage) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("all_to_allv: rank 0 sends 2 elements to rank 1 but rank 1's "
                                    "recv_counts[0] is 3"));
  }
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// On mpi, where calls are not compared, rank 1 expects 2 elements from rank 0, which sends it
// none: rank 1's receive fails, and no message is left behind for a later call (an empty block
// was no message, and the next call took the stray one's data). The other way round (rank 0
// sends 2 where rank 1 expects none, a truncated receive) hung now and then on a loaded machine
// (in CI; 5 of 20 runs on 3 ranks beside two busy loops, inside Open MPI's MPI_Waitall); it is
// left out, and docs/library.md says mismatched counts on unchecked mpi are not caught.
TEST(AllToAllvCounts, OnUncheckedMpiTheReceiverFailsAndNothingIsLeft) {
  synk::Communicator& comm = world();
  const char* checked = std::getenv("SYNK_CHECK_CALLS");
  if (comm.size() < 2 || comm.backend() != "mpi" || (checked && std::string(checked) == "1")) {
    GTEST_SKIP() << "the mpi backend without SYNK_CHECK_CALLS, 2 ranks or more";
  }
  const auto un = static_cast<std::size_t>(comm.size());
  const auto exact_call = [&] {
    std::vector<std::size_t> counts(un, 1);
    std::vector<std::int32_t> send(un), recv(un, -1);
    for (std::size_t q = 0; q < un; ++q) send[q] = 10 * comm.rank() + static_cast<int>(q);
    comm.all_to_allv(send.data(), counts, recv.data(), counts, DataType::int32);
    for (int r = 0; r < comm.size(); ++r) {
      EXPECT_EQ(recv[static_cast<std::size_t>(r)], 10 * r + comm.rank()) << "from rank " << r;
    }
  };
  for (int repeat = 0; repeat < 2; ++repeat) {
    std::vector<std::size_t> send_counts(un, 0), recv_counts(un, 0);
    if (comm.rank() == 1) recv_counts[0] = 2;
    std::vector<std::int32_t> send(2, 7), recv(2, 0);
    const auto e = synk_test::caught([&] {
      comm.all_to_allv(send.data(), send_counts, recv.data(), recv_counts, DataType::int32);
    });
    EXPECT_EQ(e.has_value(), comm.rank() == 1) << (e ? e->what() : "no error");
    exact_call();
  }
}

// ---- avg on integers, null buffers at count 0, barrier ----------------------------------------

class AvgOnIntegers : public ::testing::TestWithParam<std::tuple<std::string, DataType>> {};

TEST_P(AvgOnIntegers, IsInvalidArgumentOnEveryRank) {
  const auto& [coll, t] = GetParam();
  synk::Communicator& comm = world();
  Buffer send(t, 7 * static_cast<std::size_t>(comm.size())), recv(t, 7);
  send.fill_value(1);
  const auto e = synk_test::caught([&] {
    if (coll == "all_reduce") comm.all_reduce(send.data(), recv.data(), 7, t, ReduceOp::avg);
    if (coll == "reduce") comm.reduce(send.data(), recv.data(), 7, t, ReduceOp::avg, 0);
    if (coll == "reduce_scatter")
      comm.reduce_scatter(send.data(), recv.data(), 7, t, ReduceOp::avg);
  });
  // No ASSERT: every rank must reach still_usable's collective.
  EXPECT_TRUE(e.has_value()) << "rank " << comm.rank() << ": avg on " << synk::to_string(t)
                             << " did not throw";
  if (e) {
    EXPECT_EQ(e->code(), synk::ErrorCode::InvalidArgument) << e->what();
  }
  EXPECT_THAT(synk_test::message(e),
              HasSubstr(coll + ": op avg is not defined for integer dtype " + synk::to_string(t)));
  EXPECT_TRUE(recv.check([](std::size_t) { return 0.0; }, "recv after the rejected call"));
  EXPECT_TRUE(synk_test::still_usable(comm));
}

std::string avg_name(const ::testing::TestParamInfo<std::tuple<std::string, DataType>>& p) {
  return std::get<0>(p.param) + "_" + synk::to_string(std::get<1>(p.param));
}

INSTANTIATE_TEST_SUITE_P(
    Grid, AvgOnIntegers,
    ::testing::Combine(::testing::Values("all_reduce", "reduce", "reduce_scatter"),
                       ::testing::Values(DataType::int8, DataType::uint8, DataType::int32,
                                         DataType::uint32, DataType::int64, DataType::uint64)),
    avg_name);

// Null buffers are valid where no byte moves.
TEST(ZeroCount, NullBuffersAreAccepted) {
  synk::Communicator& comm = world();
  const DataType t = DataType::float32;
  const int last = comm.size() - 1;
  EXPECT_NO_THROW(comm.all_reduce(nullptr, nullptr, 0, t, ReduceOp::sum));
  EXPECT_NO_THROW(comm.reduce(nullptr, nullptr, 0, t, ReduceOp::max, last));
  EXPECT_NO_THROW(comm.reduce_scatter(nullptr, nullptr, 0, t, ReduceOp::prod));
  EXPECT_NO_THROW(comm.broadcast(nullptr, 0, t, last));
  EXPECT_NO_THROW(comm.all_gather(nullptr, nullptr, 0, t));
  EXPECT_NO_THROW(comm.gather(nullptr, nullptr, 0, t, last));
  EXPECT_NO_THROW(comm.scatter(nullptr, nullptr, 0, t, last));
  const std::vector<std::size_t> zeros(static_cast<std::size_t>(comm.size()), 0);
  EXPECT_NO_THROW(comm.gatherv(nullptr, 0, nullptr, zeros, t, last));
  EXPECT_NO_THROW(comm.scatterv(nullptr, zeros, nullptr, 0, t, last));
  EXPECT_NO_THROW(comm.all_to_all(nullptr, nullptr, 0, t));
  EXPECT_NO_THROW(comm.all_to_allv(nullptr, zeros, nullptr, zeros, t));
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// Rank `rank`'s values in the typed tests: rank + 1 + i at position i.
std::vector<std::int32_t> typed_values(int rank, std::size_t len) {
  std::vector<std::int32_t> v(len);
  for (std::size_t i = 0; i < len; ++i) v[i] = rank + 1 + static_cast<std::int32_t>(i);
  return v;
}

// all_to_all and iall_to_all on vectors and spans, and a send that does not split into the ranks.
void check_typed_all_to_all(synk::Communicator& comm) {
  const int me = comm.rank(), n = comm.size();
  const std::size_t un = static_cast<std::size_t>(n);
  // Block q of rank r's send is {10 * r + q, 100 + 10 * r + q}: rank q receives them in order of r.
  std::vector<std::int32_t> a2a(2 * un);
  for (std::size_t q = 0; q < un; ++q) {
    a2a[2 * q] = 10 * me + static_cast<std::int32_t>(q);
    a2a[2 * q + 1] = 100 + a2a[2 * q];
  }
  std::vector<std::int32_t> a2a_recv(2 * un, -1);
  comm.iall_to_all(std::span<const std::int32_t>(a2a), std::span<std::int32_t>(a2a_recv)).wait();
  for (const auto& got : {comm.all_to_all(a2a), a2a_recv}) {
    ASSERT_EQ(got.size(), 2 * un);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(got[2 * static_cast<std::size_t>(r)], 10 * r + me);
      EXPECT_EQ(got[2 * static_cast<std::size_t>(r) + 1], 100 + 10 * r + me);
    }
  }
  if (n > 1) {
    try {
      // The same size on every rank: all throw.
      (void)comm.all_to_all(typed_values(me, 2 * un + 1));
      ADD_FAILURE() << "all_to_all of a send that does not split into the ranks returned";
    } catch (const synk::Error& e) {
      EXPECT_EQ(e.code(), synk::ErrorCode::InvalidArgument);
      EXPECT_THAT(e.what(), ::testing::HasSubstr("blocks of 2 are needed"));
    }
  }
}

// The typed helpers (the DataType from the element type), with exact values: rank r holds
// r + 1 + i at position i.
TEST(Typed, VectorsAndSpansForEveryCollective) {
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size();
  const std::size_t un = static_cast<std::size_t>(n);
  auto mine = [&](std::size_t len) { return typed_values(me, len); };
  // Sum over ranks of r + 1 + i.
  auto total = [&](std::size_t i) { return n * (n + 1) / 2 + n * static_cast<std::int32_t>(i); };

  const std::vector<std::int32_t> send = mine(3);
  std::vector<std::int32_t> recv(3);
  comm.all_reduce(send, recv);
  EXPECT_THAT(recv, ::testing::ElementsAre(total(0), total(1), total(2)));

  std::vector<std::int32_t> buf = mine(3);
  const int last = n - 1;
  comm.reduce(buf, last, ReduceOp::max);
  if (me == last) {
    EXPECT_THAT(buf, ::testing::ElementsAre(n, n + 1, n + 2));
  } else {
    EXPECT_EQ(buf, mine(3));  // untouched off the root
  }

  std::vector<std::int32_t> two = mine(2);
  for (const auto& all : {comm.all_gather(two), comm.all_gather(std::span<std::int32_t>(two))}) {
    ASSERT_EQ(all.size(), 2 * un);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(all[2 * static_cast<std::size_t>(r)], r + 1);
      EXPECT_EQ(all[2 * static_cast<std::size_t>(r) + 1], r + 2);
    }
  }

  const std::vector<std::int32_t> g = comm.gather(two, last);
  ASSERT_EQ(g.size(), me == last ? 2 * un : 0u);
  for (std::size_t k = 0; k < g.size(); ++k) {
    EXPECT_EQ(g[k], static_cast<std::int32_t>(k / 2) + 1 + static_cast<std::int32_t>(k % 2));
  }

  const std::vector<std::int32_t> rs = comm.reduce_scatter(mine(2 * un));
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0], total(2 * static_cast<std::size_t>(me)));
  EXPECT_EQ(rs[1], total(2 * static_cast<std::size_t>(me) + 1));
  if (n > 1) {
    try {
      (void)comm.reduce_scatter(mine(2 * un + 1));  // the same size on every rank: all throw
      ADD_FAILURE() << "reduce_scatter of a send that does not split into the ranks returned";
    } catch (const synk::Error& e) {
      EXPECT_EQ(e.code(), synk::ErrorCode::InvalidArgument);
      EXPECT_THAT(e.what(), ::testing::HasSubstr("not a multiple of the"));
    }
  }

  check_typed_all_to_all(comm);
  if (HasFatalFailure()) return;  // a failed ASSERT in it ends the test, as it did here
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// Causal, not timed: rank r sleeps, leaves a file, then enters the barrier; whoever leaves the
// barrier must find every rank's file. Two rounds, so both the first and the last rank arrive late.
TEST(Barrier, NoRankLeavesBeforeAllArrive) {
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size();
  char dir[256] = {};
  if (me == 0) {
    std::snprintf(dir, sizeof dir, "%s", "/tmp/synk-barrier-XXXXXX");
    EXPECT_NE(mkdtemp(dir), nullptr) << "mkdtemp " << dir;  // no ASSERT: the others would wait
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  for (int round = 0; round < 2; ++round) {
    const int late = round == 0 ? me : n - 1 - me;
    std::this_thread::sleep_for(std::chrono::milliseconds(40 * late));
    const std::string mine =
        std::string(dir) + "/" + std::to_string(round) + "-" + std::to_string(me);
    std::ofstream(mine).put('x');
    comm.barrier();
    for (int r = 0; r < n; ++r) {
      const std::string theirs =
          std::string(dir) + "/" + std::to_string(round) + "-" + std::to_string(r);
      EXPECT_TRUE(std::filesystem::exists(theirs))
          << "rank " << me << " left barrier round " << round << " before rank " << r << " arrived";
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 0) std::filesystem::remove_all(dir);
}

// Many large broadcasts, all_gathers and gathers of one size: on shm, trials of both ways (the
// slots, cross-memory attach) and the ranks' decisions (algo_chooser.h) come in the middle of
// them, and every call's result stays exact, whatever each rank measured.
TEST(MeasuredChoice, ResultsStayExactThroughTrialsAndDecisions) {
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size();
  const auto N = static_cast<std::size_t>(n);
  constexpr std::size_t kCount = 20000;  // 80 KB per rank: measured, not forced (64 KiB+)
  constexpr int kCalls = 460;  // 64 calls, a trial of 64, 256 calls, a second trial
  std::vector<std::int32_t> buf(kCount), all(kCount * N), mine(kCount);
  for (int call = 0; call < kCalls; ++call) {
    const int root = call % n;
    for (std::size_t i = 0; i < kCount; ++i) {
      buf[i] = me == root ? static_cast<std::int32_t>(i) + call : -1;
      mine[i] = static_cast<std::int32_t>(i) * n + me + call;
    }
    comm.broadcast(buf.data(), kCount, DataType::int32, root);
    comm.all_gather(mine.data(), all.data(), kCount, DataType::int32);
    for (std::size_t i = 0; i < kCount; i += 997) {
      ASSERT_EQ(buf[i], static_cast<std::int32_t>(i) + call) << "broadcast, call " << call;
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(all[static_cast<std::size_t>(r) * kCount + i], static_cast<std::int32_t>(i) * n + r + call)
            << "all_gather, call " << call << ", block " << r;
      }
    }
    std::fill(all.begin(), all.end(), -1);
    comm.gather(mine.data(), all.data(), kCount, DataType::int32, root);
    if (me == root) {
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(all[static_cast<std::size_t>(r) * kCount + kCount - 1],
                  static_cast<std::int32_t>(kCount - 1) * n + r + call)
            << "gather, call " << call << ", block " << r;
      }
    }
  }
}

}  // namespace
