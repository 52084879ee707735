// Bad arguments: passed alike on every rank, each must become a synk::Error with the right code
// and a message naming the operation and the value, on every rank, with no hang and no damage;
// passed on one rank only, the shm backend still fails the call everywhere.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mpi_test.h"

namespace {

using synk::DataType;
using synk::ErrorCode;
using synk::ReduceOp;
using synk_test::caught;
using synk_test::world;
using ::testing::HasSubstr;

// After every bad call, the same communicator must still run a correct collective.
class BadArgs : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_TRUE(synk_test::still_usable(world())); }

  synk::Communicator& comm = world();
  std::vector<float> a = std::vector<float>(64, 1.0f);
  std::vector<float> b = std::vector<float>(64, 0.0f);
};

TEST_F(BadArgs, NullSendWithCount) {
  const auto e =
      caught([&] { comm.all_reduce(nullptr, b.data(), 7, DataType::float32, ReduceOp::sum); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(synk_test::message(e), HasSubstr("all_reduce: send is null"));
  EXPECT_THAT(synk_test::message(e), HasSubstr("28 bytes are to be sent (count 7)"));
  EXPECT_EQ(b[0], 0.0f) << "recv written by a rejected call";
}

TEST_F(BadArgs, NullRecv) {
  const auto e = caught([&] { comm.all_gather(a.data(), nullptr, 5, DataType::float32); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(synk_test::message(e), HasSubstr("all_gather: recv is null"));
  EXPECT_THAT(synk_test::message(e), HasSubstr("(count 5)"));
}

TEST_F(BadArgs, NullBroadcastBuffer) {
  const auto e = caught([&] { comm.broadcast(nullptr, 3, DataType::int64, 0); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(synk_test::message(e), HasSubstr("broadcast: buf is null"));
  EXPECT_THAT(synk_test::message(e), HasSubstr("24 bytes"));
}

// Every rooted collective, with root -1 and root == size.
class BadRoot : public BadArgs, public ::testing::WithParamInterface<std::string> {};

TEST_P(BadRoot, OutOfRangeOnEveryRank) {
  const std::string& op = GetParam();
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 1);
  for (const int root : {-1, comm.size()}) {
    const auto e = caught([&] {
      const DataType t = DataType::float32;
      if (op == "reduce") comm.reduce(a.data(), b.data(), 1, t, ReduceOp::sum, root);
      if (op == "broadcast") comm.broadcast(b.data(), 1, t, root);
      if (op == "gather") comm.gather(a.data(), b.data(), 1, t, root);
      if (op == "gatherv") comm.gatherv(a.data(), 1, b.data(), counts, t, root);
      if (op == "scatter") comm.scatter(a.data(), b.data(), 1, t, root);
    });
    EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
    EXPECT_THAT(synk_test::message(e),
                HasSubstr(op + ": root " + std::to_string(root) + " is out of range"));
    EXPECT_THAT(synk_test::message(e), HasSubstr("for " + std::to_string(comm.size()) + " ranks"));
  }
}

std::string op_name(const ::testing::TestParamInfo<std::string>& p) { return p.param; }

INSTANTIATE_TEST_SUITE_P(Rooted, BadRoot,
                         ::testing::Values("reduce", "broadcast", "gather", "gatherv", "scatter"),
                         op_name);

TEST_F(BadArgs, InvalidDataType) {
  const auto bad = static_cast<DataType>(99);
  auto e = caught([&] { comm.all_reduce(a.data(), b.data(), 4, bad, ReduceOp::sum); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(synk_test::message(e), HasSubstr("all_reduce: dtype 99 is not a synk::DataType"));
  e = caught([&] { comm.broadcast(b.data(), 4, bad, 0); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(synk_test::message(e), HasSubstr("broadcast: dtype 99"));
}

TEST_F(BadArgs, InvalidOp) {
  const auto bad = static_cast<ReduceOp>(7);
  auto e = caught([&] { comm.all_reduce(a.data(), b.data(), 4, DataType::float32, bad); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(synk_test::message(e), HasSubstr("all_reduce: op 7 is not a synk::ReduceOp"));
  e = caught([&] { comm.reduce_scatter(a.data(), b.data(), 1, DataType::float32, bad); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(synk_test::message(e), HasSubstr("reduce_scatter: op 7"));
}

TEST_F(BadArgs, AvgOnInt32) {
  std::vector<std::int32_t> v(4, 3);
  const auto e =
      caught([&] { comm.all_reduce(v.data(), v.data(), 4, DataType::int32, ReduceOp::avg); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(synk_test::message(e),
              HasSubstr("all_reduce: op avg is not defined for integer dtype int32"));
  EXPECT_EQ(v[0], 3) << "the buffer of a rejected call changed";
}

// Overlap that is not the in-place layout would make the result depend on the algorithm.
TEST_F(BadArgs, OverlappingNotInPlace) {
  auto e =
      caught([&] { comm.all_reduce(b.data() + 1, b.data(), 8, DataType::float32, ReduceOp::sum); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(synk_test::message(e), HasSubstr("all_reduce: send "));
  EXPECT_THAT(synk_test::message(e),
              HasSubstr("(32 bytes) overlap but are not in place (in place means send == recv)"));

  // all_gather's in-place slot is recv + rank * count; one block later is wrong on every rank.
  std::vector<float> big(static_cast<std::size_t>(comm.size() + 1) * 4);
  const std::size_t wrong = static_cast<std::size_t>(comm.rank() + 1) * 4;
  e = caught([&] { comm.all_gather(big.data() + wrong - 2, big.data(), 4, DataType::float32); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(synk_test::message(e), HasSubstr("all_gather:"));
  EXPECT_THAT(synk_test::message(e), HasSubstr("in place means send == recv + rank * count"));
}

// A count whose byte size overflows is rejected before any memory is touched.
TEST_F(BadArgs, CountTooLarge) {
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 2;
  const auto e =
      caught([&] { comm.all_reduce(a.data(), b.data(), huge, DataType::float64, ReduceOp::sum); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(synk_test::message(e), HasSubstr("all_reduce: count " + std::to_string(huge)));
  EXPECT_THAT(synk_test::message(e), HasSubstr("does not fit in memory"));
}

TEST_F(BadArgs, TypedSpansOfDifferentSizes) {
  std::span<const float> send(a.data(), 5);
  std::span<float> recv(b.data(), 6);
  const auto e = caught([&] { comm.all_reduce(send, recv); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(synk_test::message(e), HasSubstr("all_reduce: send has 5 elements but recv has 6"));
}

// recv_counts is read at the root only, so only the root can see these errors. On the mpi
// backend the others cannot know without SYNK_CHECK_CALLS (see check_calls_test): they send
// their 0 elements, a no-op, and the communicator stays in step. The shm backend tells them
// inside the call itself (ShmRejects below).
class GathervRootOnly : public BadArgs {
 protected:
  synk::Communicator mpi{MPI_COMM_WORLD, synk::CommOptions{"mpi"}};

  void expect_root_only_error(std::span<const std::size_t> counts, int root,
                              const std::string& text) {
    const auto e =
        caught([&] { mpi.gatherv(a.data(), 0, b.data(), counts, DataType::float32, root); });
    if (mpi.rank() == root) {
      EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
      EXPECT_THAT(synk_test::message(e), HasSubstr(text));
    } else {
      EXPECT_FALSE(e.has_value()) << e->what();
    }
    EXPECT_TRUE(synk_test::still_usable(mpi));
  }
};

TEST_F(GathervRootOnly, RecvCountsOfWrongLength) {
  const std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()) + 1, 0);
  expect_root_only_error(counts, comm.size() - 1,
                         "gatherv: recv_counts has " + std::to_string(counts.size()) +
                             " entries at the root, expected one per rank (" +
                             std::to_string(comm.size()) + ")");
}

TEST_F(GathervRootOnly, RootCountDisagreesWithItsSend) {
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 0);
  counts[0] = 3;
  expect_root_only_error(counts, 0, "gatherv: the root sends 0 elements but recv_counts[0] is 3");
}

// On the shm backend an argument rejected on one rank fails the call on every rank (the others
// get a Remote error naming it) and the communicator stays in step.
class ShmRejects : public BadArgs {
 protected:
  void SetUp() override {
    if (comm.num_nodes() != 1) GTEST_SKIP() << "the shm backend needs one node";
    shm.emplace(MPI_COMM_WORLD, synk::CommOptions{"shm"});
  }
  std::optional<synk::Communicator> shm;
};

TEST_F(ShmRejects, GathervRecvCountsOfWrongLengthAtTheRoot) {
  const int root = comm.size() - 1;
  const std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()) + 1, 0);
  const auto e = caught([&] { shm->gatherv(a.data(), 0, b.data(), counts, DataType::float32, root); });
  EXPECT_SYNK_ERROR(e, shm->rank() == root ? ErrorCode::InvalidArgument : ErrorCode::Remote);
  EXPECT_THAT(synk_test::message(e), HasSubstr("recv_counts has"));
  if (shm->rank() != root) {
    EXPECT_THAT(synk_test::message(e),
                HasSubstr("gatherv: rank " + std::to_string(root) + " rejected its arguments"));
  }
  EXPECT_TRUE(synk_test::still_usable(*shm));
}

TEST_F(ShmRejects, NullBufferOnRankZeroOnly) {
  const auto e = caught([&] {
    shm->all_reduce(shm->rank() == 0 ? nullptr : a.data(), b.data(), 16, DataType::float32,
                    ReduceOp::sum);
  });
  EXPECT_SYNK_ERROR(e, shm->rank() == 0 ? ErrorCode::InvalidArgument : ErrorCode::Remote);
  EXPECT_THAT(synk_test::message(e), HasSubstr("send is null"));
  EXPECT_TRUE(synk_test::still_usable(*shm));
}

// A typed helper's own check failing on one rank only fails the call on every rank too (it
// threw before the call on that rank alone, and the others waited).
TEST_F(ShmRejects, TypedSizesWrongOnTheLastRankOnly) {
  const int bad = shm->size() - 1;
  const auto e = caught([&] {
    std::span<const float> send(a.data(), shm->rank() == bad ? 5 : 6);
    std::span<float> recv(b.data(), 6);
    shm->all_reduce(send, recv);
  });
  EXPECT_SYNK_ERROR(e, shm->rank() == bad ? ErrorCode::InvalidArgument : ErrorCode::Remote);
  EXPECT_THAT(synk_test::message(e), HasSubstr("all_reduce: send has 5 elements but recv has 6"));
  if (shm->size() > 1) {  // every size is a multiple of 1
    const auto f = caught([&] {
      const std::size_t n = static_cast<std::size_t>(shm->size());
      std::vector<float> send(shm->rank() == bad ? 2 * n + 1 : 2 * n, 1.0f);
      (void)shm->reduce_scatter(send);
    });
    EXPECT_SYNK_ERROR(f, shm->rank() == bad ? ErrorCode::InvalidArgument : ErrorCode::Remote);
    EXPECT_THAT(synk_test::message(f), HasSubstr("not a multiple of the"));
  }
  EXPECT_TRUE(synk_test::still_usable(*shm));
}

TEST(BadComm, NullMpiComm) {
  const auto e = caught([] { synk::Communicator c(MPI_COMM_NULL); });
  EXPECT_TRUE(e.has_value());
  if (e) {
    EXPECT_EQ(e->code(), ErrorCode::InvalidArgument);
  }
  EXPECT_THAT(synk_test::message(e), HasSubstr("Communicator: comm is MPI_COMM_NULL"));
}

TEST(BadComm, UnknownBackend) {
  const auto e = caught([] { synk::Communicator c(synk::CommOptions{"carrier-pigeon"}); });
  EXPECT_TRUE(e.has_value());
  if (e) {
    EXPECT_EQ(e->code(), ErrorCode::InvalidArgument);
  }
  EXPECT_THAT(synk_test::message(e),
              HasSubstr("backend 'carrier-pigeon' is not one of auto, mpi, shm or nccl"));
  EXPECT_TRUE(synk_test::still_usable(world()));
}

}  // namespace
