// The one validation function: every argument check, on a fake rank layout (no MPI needed).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/validation.h"
#include "synk/error.h"

namespace synk::detail {
namespace {

using ::testing::HasSubstr;

CommContext layout(int rank, int size) {
  CommContext c;
  c.rank = rank;
  c.size = size;
  return c;
}

CollArgs call(Collective c, const void* send, void* recv, std::size_t count,
              DataType t = DataType::float32, ReduceOp op = ReduceOp::sum, int root = 0) {
  CollArgs a;
  a.coll = c;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = t;
  a.op = op;
  a.root = root;
  return a;
}

// Returns the message, or fails when no synk::Error with `code` is thrown.
std::string rejected(const CollArgs& a, const CommContext& ctx, ErrorCode code) {
  try {
    validate(a, ctx);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << to_string(a.coll);
  return {};
}

class Validation : public ::testing::Test {
 protected:
  std::vector<float> a_ = std::vector<float>(64);
  std::vector<float> b_ = std::vector<float>(64);
  CommContext ctx_ = layout(1, 4);
};

TEST_F(Validation, GoodCallsPass) {
  EXPECT_NO_THROW(validate(call(Collective::all_reduce, a_.data(), b_.data(), 16), ctx_));
  EXPECT_NO_THROW(validate(call(Collective::all_reduce, a_.data(), a_.data(), 16), ctx_));
  EXPECT_NO_THROW(validate(call(Collective::all_reduce, nullptr, nullptr, 0), ctx_));
  EXPECT_NO_THROW(validate(call(Collective::barrier, nullptr, nullptr, 0), ctx_));
  // Off the root, reduce's recv and scatter's send are not used and may be null.
  EXPECT_NO_THROW(validate(call(Collective::reduce, a_.data(), nullptr, 16, DataType::float32,
                                ReduceOp::max, 0), ctx_));
  EXPECT_NO_THROW(validate(call(Collective::scatter, nullptr, b_.data(), 16, DataType::float32,
                                ReduceOp::sum, 3), ctx_));
  EXPECT_NO_THROW(validate(call(Collective::all_reduce, a_.data(), b_.data(), 16,
                                DataType::float16, ReduceOp::avg), ctx_));
}

TEST_F(Validation, NullBuffersWithCount) {
  auto m = rejected(call(Collective::all_reduce, nullptr, b_.data(), 100), ctx_,
                    ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("all_reduce: send is null"));
  EXPECT_THAT(m, HasSubstr("count 100"));
  m = rejected(call(Collective::all_gather, a_.data(), nullptr, 3), ctx_, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("recv is null but 48 bytes"));  // 4 ranks x 3 floats
  m = rejected(call(Collective::broadcast, nullptr, nullptr, 2), ctx_, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("broadcast: buf is null"));
  // At the root, gather's recv is needed.
  CommContext root = layout(0, 4);
  rejected(call(Collective::gather, a_.data(), nullptr, 4), root, ErrorCode::InvalidArgument);
}

TEST_F(Validation, RootOutOfRange) {
  for (int bad : {-1, 4, 1000}) {
    const auto m = rejected(call(Collective::broadcast, a_.data(), a_.data(), 4, DataType::float32,
                                 ReduceOp::sum, bad), ctx_, ErrorCode::InvalidArgument);
    EXPECT_THAT(m, HasSubstr("root " + std::to_string(bad) + " is out of range for 4 ranks"));
  }
}

TEST_F(Validation, BadDtypeOpAndAvgOnIntegers) {
  auto m = rejected(call(Collective::all_reduce, a_.data(), b_.data(), 4, static_cast<DataType>(99)),
                    ctx_, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("dtype 99"));
  m = rejected(call(Collective::all_reduce, a_.data(), b_.data(), 4, DataType::float32,
                    static_cast<ReduceOp>(7)), ctx_, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("op 7"));
  for (DataType t : {DataType::int8, DataType::uint8, DataType::int32, DataType::uint32,
                     DataType::int64, DataType::uint64}) {
    m = rejected(call(Collective::reduce_scatter, a_.data(), b_.data(), 4, t, ReduceOp::avg), ctx_,
                 ErrorCode::InvalidArgument);
    EXPECT_THAT(m, HasSubstr(std::string("op avg is not defined for integer dtype ") + to_string(t)));
  }
  // The op is not part of a broadcast: an unused op value is not checked.
  EXPECT_NO_THROW(validate(call(Collective::broadcast, a_.data(), a_.data(), 4, DataType::int32,
                                ReduceOp::avg), ctx_));
}

TEST_F(Validation, InPlaceRules) {
  float* buf = a_.data();
  // all_reduce: only send == recv.
  auto m = rejected(call(Collective::all_reduce, buf, buf + 1, 16), ctx_, ErrorCode::InvalidUsage);
  EXPECT_THAT(m, HasSubstr("overlap but are not in place (in place means send == recv)"));
  // all_gather in place: send == recv + rank * count (rank 1, count 4).
  EXPECT_NO_THROW(validate(call(Collective::all_gather, buf + 4, buf, 4), ctx_));
  rejected(call(Collective::all_gather, buf, buf, 4), ctx_, ErrorCode::InvalidUsage);
  // reduce_scatter in place: recv == send + rank * recv_count.
  EXPECT_NO_THROW(validate(call(Collective::reduce_scatter, buf, buf + 4, 4), ctx_));
  m = rejected(call(Collective::reduce_scatter, buf, buf + 8, 4), ctx_, ErrorCode::InvalidUsage);
  EXPECT_THAT(m, HasSubstr("recv == send + rank * recv_count"));
  // gather at root 2 in place: send == recv + 2 * count.
  CommContext root2 = layout(2, 4);
  EXPECT_NO_THROW(validate(call(Collective::gather, buf + 8, buf, 4, DataType::float32,
                                ReduceOp::sum, 2), root2));
  rejected(call(Collective::gather, buf + 4, buf, 4, DataType::float32, ReduceOp::sum, 2), root2,
           ErrorCode::InvalidUsage);
  // scatter at the root in place: recv == send + root * count.
  EXPECT_NO_THROW(validate(call(Collective::scatter, buf, buf + 8, 4, DataType::float32,
                                ReduceOp::sum, 2), root2));
  // Off the root, gather's recv is not used, so nothing can overlap.
  EXPECT_NO_THROW(validate(call(Collective::gather, buf, buf, 4, DataType::float32,
                                ReduceOp::sum, 0), ctx_));
}

TEST_F(Validation, Gatherv) {
  CommContext root = layout(0, 3);
  std::vector<std::size_t> counts = {2, 0, 5};
  CollArgs a = call(Collective::gatherv, a_.data(), b_.data(), 2);
  a.counts = counts;
  EXPECT_NO_THROW(validate(a, root));
  std::vector<std::size_t> short_counts = {2, 0};
  a.counts = short_counts;
  auto m = rejected(a, root, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("recv_counts has 2 entries at the root, expected one per rank (3)"));
  a.counts = counts;
  a.count = 3;
  m = rejected(a, root, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("the root sends 3 elements but recv_counts[0] is 2"));
  // In place at root 2: send == recv + (2 + 0).
  CommContext root2 = layout(2, 3);
  CollArgs in_place = call(Collective::gatherv, a_.data() + 2, a_.data(), 5, DataType::float32,
                           ReduceOp::sum, 2);
  in_place.counts = counts;
  EXPECT_NO_THROW(validate(in_place, root2));
}

TEST_F(Validation, Scatterv) {
  CommContext root = layout(0, 3);
  std::vector<std::size_t> counts = {2, 0, 5};
  CollArgs a = call(Collective::scatterv, a_.data(), b_.data(), 2);
  a.counts = counts;
  EXPECT_NO_THROW(validate(a, root));
  std::vector<std::size_t> short_counts = {2, 0};
  a.counts = short_counts;
  auto m = rejected(a, root, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("scatterv: send_counts has 2 entries at the root, expected one per "
                           "rank (3)"));
  a.counts = counts;
  a.count = 3;
  m = rejected(a, root, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("the root receives 3 elements but send_counts[0] is 2"));
  // In place at root 2: recv == send + (2 + 0); any other overlap is refused.
  CommContext root2 = layout(2, 3);
  CollArgs in_place = call(Collective::scatterv, a_.data(), a_.data() + 2, 5, DataType::float32,
                           ReduceOp::sum, 2);
  in_place.counts = counts;
  EXPECT_NO_THROW(validate(in_place, root2));
  in_place.recv = a_.data() + 1;
  m = rejected(in_place, root2, ErrorCode::InvalidUsage);
  EXPECT_THAT(m, HasSubstr("recv == send + (sum of send_counts before the root)"));
  // Off the root, send and send_counts are not read.
  CollArgs off = call(Collective::scatterv, nullptr, b_.data(), 4, DataType::float32,
                      ReduceOp::sum, 2);
  EXPECT_NO_THROW(validate(off, root));
}

// all_to_all moves size() blocks each way and has no in place: any overlap is refused.
TEST_F(Validation, AllToAll) {
  float* buf = a_.data();
  EXPECT_NO_THROW(validate(call(Collective::all_to_all, buf, b_.data(), 16), ctx_));
  EXPECT_NO_THROW(validate(call(Collective::all_to_all, nullptr, nullptr, 0), ctx_));
  auto m = rejected(call(Collective::all_to_all, buf, buf, 4), ctx_, ErrorCode::InvalidUsage);
  EXPECT_THAT(m, HasSubstr("all_to_all"));
  EXPECT_THAT(m, HasSubstr("(64 bytes) overlap, and all_to_all has no in place"));
  rejected(call(Collective::all_to_all, buf, buf + 15, 4), ctx_, ErrorCode::InvalidUsage);
  EXPECT_NO_THROW(validate(call(Collective::all_to_all, buf, buf + 16, 4), ctx_));  // adjacent
  m = rejected(call(Collective::all_to_all, buf, nullptr, 2), ctx_, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("recv is null but 32 bytes"));  // 4 ranks x 2 floats
}

// all_to_allv: a count per rank each way, what a rank sends itself it receives, no in place.
TEST_F(Validation, AllToAllv) {
  float* buf = a_.data();
  const std::vector<std::size_t> sends{1, 2, 3, 4}, recvs{4, 2, 1, 0}, three{1, 2, 3};
  CollArgs a = call(Collective::all_to_allv, buf, b_.data(), 10);
  a.counts = sends;
  a.recv_counts = recvs;
  EXPECT_NO_THROW(validate(a, ctx_));  // rank 1 of 4: sends itself 2, receives 2
  CollArgs bad = a;
  bad.recv_counts = three;
  auto m = rejected(bad, ctx_, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("all_to_allv: recv_counts has 3 entries, expected one per rank (4)"));
  bad = a;
  bad.counts = three;
  m = rejected(bad, ctx_, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("send_counts has 3 entries"));
  const std::vector<std::size_t> own_differs{4, 5, 1, 0};
  bad = a;
  bad.recv_counts = own_differs;
  m = rejected(bad, ctx_, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("send_counts[1] is 2 but recv_counts[1] is 5"));
  bad = a;
  bad.recv = buf + 9;  // send holds 10 floats: the last one overlaps
  m = rejected(bad, ctx_, ErrorCode::InvalidUsage);
  EXPECT_THAT(m, HasSubstr("overlap, and all_to_allv has no in place"));
  bad = a;
  bad.send = nullptr;
  m = rejected(bad, ctx_, ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("send is null but 40 bytes"));
}

TEST_F(Validation, SizesThatCannotExist) {
  const std::size_t huge = SIZE_MAX / 2;
  auto m = rejected(call(Collective::all_gather, a_.data(), b_.data(), huge), ctx_,
                    ErrorCode::InvalidArgument);
  EXPECT_THAT(m, HasSubstr("does not fit in memory"));
}

}  // namespace
}  // namespace synk::detail
