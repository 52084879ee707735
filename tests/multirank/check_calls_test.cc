// SYNK_CHECK_CALLS=1: calls that differ between ranks, and an argument error on one rank only,
// must become a synk::Error on every rank (naming both calls, or the failing rank), not a hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "mpi_test.h"

namespace {

using synk::DataType;
using synk::ErrorCode;
using synk::ReduceOp;
using synk_test::caught;
using synk_test::world;
using ::testing::HasSubstr;

class CheckCalls : public ::testing::Test {
 protected:
  void SetUp() override {
    // Without the variable, the mismatched calls below would corrupt memory or hang: fail
    // instead (the same on every rank, since they share the environment).
    // (The hier backend, across nodes, always compares the calls.)
    const char* v = std::getenv("SYNK_CHECK_CALLS");
    if ((v == nullptr || std::string(v) != "1") && comm.backend() != "hier") {
      FAIL() << "run this binary with SYNK_CHECK_CALLS=1 (ctest sets it), or on several nodes";
    }
    if (comm.size() < 2) GTEST_SKIP() << "mismatches between ranks need at least 2 ranks";
    ready_ = true;
  }
  // Decided by SetUp alone, which is the same on every rank: an ASSERT that fails on one rank
  // must not make it skip a collective the others make.
  void TearDown() override {
    if (ready_) {
      EXPECT_TRUE(synk_test::still_usable(comm));
    }
  }

  bool ready_ = false;

  // The ranks of the common call where only rank 1's differs: "rank 0", "ranks 0, 2 and 3".
  std::string the_others() const {
    if (comm.size() == 2) return "rank 0";
    std::string s = "ranks 0";
    for (int r = 2; r < comm.size(); ++r) {
      s += (r + 1 == comm.size() ? " and " : ", ") + std::to_string(r);
    }
    return s;
  }

  synk::Communicator& comm = world();
  const int me = comm.rank();
  std::vector<float> a = std::vector<float>(256, 1.0f);
  std::vector<float> b = std::vector<float>(256, 0.0f);
};

TEST_F(CheckCalls, MatchingCallsStillWork) {
  const auto e =
      caught([&] { comm.all_reduce(a.data(), b.data(), 100, DataType::float32, ReduceOp::sum); });
  EXPECT_FALSE(e.has_value()) << e->what();
  EXPECT_EQ(b[99], static_cast<float>(comm.size()));
  EXPECT_EQ(b[100], 0.0f);
}

TEST_F(CheckCalls, DifferentCounts) {
  const std::size_t count = me == 1 ? 200 : 100;
  const auto e =
      caught([&] { comm.all_reduce(a.data(), b.data(), count, DataType::float32, ReduceOp::sum); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(synk_test::message(e), HasSubstr("all_reduce: mismatched calls"));
  EXPECT_THAT(synk_test::message(e),
              HasSubstr(the_others() + " called all_reduce(count 100, float32, sum)"));
  EXPECT_THAT(synk_test::message(e),
              HasSubstr("rank 1 called all_reduce(count 200, float32, sum)"));
  EXPECT_EQ(b[0], 0.0f) << "a rejected call wrote recv";
}

// Every call made is named with the ranks that made it: on 4 ranks, counts 100, 101, 102, 100.
TEST_F(CheckCalls, EachCallIsNamedWithItsRanks) {
  if (comm.size() != 2 && comm.size() != 4) GTEST_SKIP() << "written for 2 or 4 ranks";
  const std::size_t count = 100 + static_cast<std::size_t>(me % 3);
  const auto e =
      caught([&] { comm.all_reduce(a.data(), b.data(), count, DataType::float32, ReduceOp::sum); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  const std::string want =
      comm.size() == 2 ? "all_reduce: mismatched calls: rank 0 called all_reduce(count 100, "
                         "float32, sum), rank 1 called all_reduce(count 101, float32, sum)"
                       : "all_reduce: mismatched calls: ranks 0 and 3 called all_reduce(count "
                         "100, float32, sum), rank 1 called all_reduce(count 101, float32, sum), "
                         "rank 2 called all_reduce(count 102, float32, sum)";
  EXPECT_THAT(synk_test::message(e), HasSubstr(want));
}

TEST_F(CheckCalls, DifferentCollectives) {
  const auto e = caught([&] {
    if (me == 1) {
      comm.broadcast(b.data(), 100, DataType::float32, 0);
    } else {
      comm.all_reduce(a.data(), b.data(), 100, DataType::float32, ReduceOp::sum);
    }
  });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(synk_test::message(e),
              HasSubstr(std::string(me == 1 ? "broadcast" : "all_reduce") + ": mismatched calls"));
  EXPECT_THAT(synk_test::message(e),
              HasSubstr(the_others() + " called all_reduce(count 100, float32, sum)"));
  EXPECT_THAT(synk_test::message(e),
              HasSubstr("rank 1 called broadcast(count 100, float32, root 0)"));
}

// A collective synk makes on the user's communicator is named by the call it is part of. Before,
// a KeyValue::init_key on the others read as an all_reduce the user never called.
TEST_F(CheckCalls, SynksOwnCallsAreNamedByTheirPart) {
  synk::KeyValue kv(comm);
  const auto e = caught([&] {
    if (me == 1) {
      comm.all_reduce(a.data(), b.data(), 100, DataType::float32, ReduceOp::sum);
    } else {
      kv.init_key(5, 4, DataType::float32);
    }
  });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(synk_test::message(e),
              HasSubstr(std::string(me == 1 ? "all_reduce" : "KeyValue::init_key") +
                        ": mismatched calls"));
  EXPECT_THAT(synk_test::message(e),
              HasSubstr(the_others() +
                        " called KeyValue::init_key (its all_reduce(count 10, uint64, max))"));
  EXPECT_THAT(synk_test::message(e),
              HasSubstr("rank 1 called all_reduce(count 100, float32, sum)"));
}

// A non-blocking call issued before a labelled one keeps its own label wherever it runs: on
// rank 0 init_key's all_reduce runs the queued iall_reduce on rank 0's thread, under
// init_key's label, while rank 1's progress thread ran it as the user's; compared, they were
// "mismatched calls".
TEST_F(CheckCalls, QueuedCallsKeepTheirOwnLabel) {
  synk::KeyValue kv(comm);
  synk::Request r =
      comm.iall_reduce(a.data(), b.data(), 100, DataType::float32, ReduceOp::sum);
  if (me != 0) r.wait();
  const auto e = caught([&] { kv.init_key(6, 4, DataType::float32); });
  EXPECT_FALSE(e.has_value()) << e->what();
  const auto w = caught([&] { r.wait(); });
  EXPECT_FALSE(w.has_value()) << w->what();
  EXPECT_EQ(b[99], static_cast<float>(comm.size()));
}

TEST_F(CheckCalls, DifferentRoots) {
  const int root = me == 1 ? 1 : 0;
  const auto e = caught([&] { comm.broadcast(b.data(), 10, DataType::float32, root); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(synk_test::message(e),
              HasSubstr(the_others() + " called broadcast(count 10, float32, root 0)"));
  EXPECT_THAT(synk_test::message(e),
              HasSubstr("rank 1 called broadcast(count 10, float32, root 1)"));
}

TEST_F(CheckCalls, DifferentTypesAndOps) {
  const DataType t = me == 1 ? DataType::int32 : DataType::float32;
  auto e = caught([&] { comm.all_reduce(a.data(), b.data(), 8, t, ReduceOp::sum); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(synk_test::message(e), HasSubstr("rank 1 called all_reduce(count 8, int32, sum)"));
  const ReduceOp op = me == 1 ? ReduceOp::max : ReduceOp::sum;
  e = caught([&] { comm.reduce(a.data(), b.data(), 8, DataType::float32, op, 0); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(synk_test::message(e),
              HasSubstr(the_others() + " called reduce(count 8, float32, sum, root 0)"));
  EXPECT_THAT(synk_test::message(e),
              HasSubstr("rank 1 called reduce(count 8, float32, max, root 0)"));
}

TEST_F(CheckCalls, AllToAllCounts) {
  const std::size_t count = me == 1 ? 6 : 8;
  const auto e = caught([&] { comm.all_to_all(a.data(), b.data(), count, DataType::float32); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(synk_test::message(e),
              HasSubstr(the_others() + " called all_to_all(count 8, float32)"));
  EXPECT_THAT(synk_test::message(e), HasSubstr("rank 1 called all_to_all(count 6, float32)"));
}

// Rank 1 alone passes a null buffer: it gets its own InvalidArgument, the others a Remote error
// naming rank 1 and carrying its message.
TEST_F(CheckCalls, NullBufferOnOneRank) {
  const float* send = me == 1 ? nullptr : a.data();
  const auto e =
      caught([&] { comm.all_reduce(send, b.data(), 16, DataType::float32, ReduceOp::sum); });
  if (me == 1) {
    EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
    EXPECT_THAT(synk_test::message(e), HasSubstr("all_reduce: send is null"));
  } else {
    EXPECT_SYNK_ERROR(e, ErrorCode::Remote);
    // Its message without its kind a second time ("... arguments: synk InvalidArgument: ...").
    EXPECT_THAT(synk_test::message(e),
                HasSubstr("all_reduce: rank 1 rejected its arguments: all_reduce: send is null"));
  }
}

TEST_F(CheckCalls, GathervSendCountDisagreesWithRoot) {
  const int root = 0;
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 4);
  const std::size_t send_count = me == 1 ? 5 : 4;
  const auto e = caught(
      [&] { comm.gatherv(a.data(), send_count, b.data(), counts, DataType::float32, root); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(synk_test::message(e),
              HasSubstr("gatherv: rank 1 sends 5 elements but the root's recv_counts[1] is 4"));
}

TEST_F(CheckCalls, ScattervRecvCountDisagreesWithRoot) {
  const int root = 0;
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 4);
  const std::size_t recv_count = me == 1 ? 5 : 4;
  const auto e = caught(
      [&] { comm.scatterv(a.data(), counts, b.data(), recv_count, DataType::float32, root); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(synk_test::message(e),
              HasSubstr("scatterv: rank 1 receives 5 elements but the root's send_counts[1] is 4"));
}

// What bad_args_test can only check at the root: here every rank learns of it.
TEST_F(CheckCalls, GathervRecvCountsOfWrongLengthAtRoot) {
  const int root = comm.size() - 1;
  const std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()) + 1, 0);
  const auto e =
      caught([&] { comm.gatherv(a.data(), 0, b.data(), counts, DataType::float32, root); });
  if (me == root) {
    EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
    EXPECT_THAT(synk_test::message(e), HasSubstr("gatherv: recv_counts has"));
  } else {
    EXPECT_SYNK_ERROR(e, ErrorCode::Remote);
    EXPECT_THAT(synk_test::message(e),
                HasSubstr("gatherv: rank " + std::to_string(root) + " rejected its arguments"));
  }
}

TEST_F(CheckCalls, GathervMatchingCountsStillWork) {
  const int root = comm.size() - 1;
  std::vector<std::size_t> counts;
  for (int r = 0; r < comm.size(); ++r) counts.push_back(static_cast<std::size_t>(r) + 1);
  std::vector<float> send(static_cast<std::size_t>(me) + 1, static_cast<float>(me));
  const auto e = caught(
      [&] { comm.gatherv(send.data(), send.size(), b.data(), counts, DataType::float32, root); });
  EXPECT_FALSE(e.has_value()) << e->what();
  if (me == root) {
    std::size_t k = 0;
    for (int r = 0; r < comm.size(); ++r) {
      for (int j = 0; j <= r; ++j, ++k) {
        EXPECT_EQ(b[k], static_cast<float>(r)) << "element " << k;
      }
    }
  }
}

// Rank 1 arrives 1.2 s late: the others wait past the point (at most 1 s) where a waiting rank
// tells every other one that it arrived, for a Timeout to name who did not. Those notices must
// change nothing: this call, the gatherv after it (point to point on the same communicator) and
// the calls after those give the right results.
TEST_F(CheckCalls, ALateRankIsWaitedForAndLaterCallsStillWork) {
  if (me == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  auto e =
      caught([&] { comm.all_reduce(a.data(), b.data(), 8, DataType::float32, ReduceOp::sum); });
  EXPECT_FALSE(e.has_value()) << e->what();
  EXPECT_EQ(b[7], static_cast<float>(comm.size()));
  const int root = comm.size() - 1;
  const std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 2);
  const std::vector<float> send(2, static_cast<float>(me));
  e = caught([&] { comm.gatherv(send.data(), 2, b.data(), counts, DataType::float32, root); });
  EXPECT_FALSE(e.has_value()) << e->what();
  if (me == root) {
    for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(b[2 * static_cast<std::size_t>(r) + 1], r);
  }
  for (int i = 0; i < 50; ++i) {
    std::vector<float> x(3, static_cast<float>(i + me));
    comm.all_reduce(x);
    EXPECT_EQ(x[2], static_cast<float>(comm.size() * i + comm.size() * (comm.size() - 1) / 2));
  }
}

}  // namespace
