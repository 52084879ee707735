// The collectives grid: every collective x dtype x op x count x in place or not x root, checked
// element by element on every rank against closed-form results that are exact in every type.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
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

enum class Coll {
  all_reduce,
  reduce,
  reduce_scatter,
  broadcast,
  all_gather,
  gather,
  scatter,
  all_to_all
};
enum class Place { out_of_place, in_place, mixed };  // mixed: odd ranks in place, even not

const char* to_string(Coll c) {
  switch (c) {
    case Coll::all_reduce:
      return "all_reduce";
    case Coll::reduce:
      return "reduce";
    case Coll::reduce_scatter:
      return "reduce_scatter";
    case Coll::broadcast:
      return "broadcast";
    case Coll::all_gather:
      return "all_gather";
    case Coll::gather:
      return "gather";
    case Coll::scatter:
      return "scatter";
    case Coll::all_to_all:
      return "all_to_all";
  }
  return "?";
}

const char* to_string(Place p) {
  switch (p) {
    case Place::out_of_place:
      return "outofplace";
    case Place::in_place:
      return "inplace";
    case Place::mixed:
      return "mixed";
  }
  return "?";
}

struct Case {
  Coll coll;
  DataType dtype;
  ReduceOp op;  // reductions only
  std::size_t count;
  Place place;
  Root root;  // rooted collectives only
};

constexpr ReduceOp kAllOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                ReduceOp::avg};
constexpr std::size_t kBig = (std::size_t{1} << 20) + 3;
constexpr std::size_t kCounts[] = {0, 1, 7, 4097, kBig};

// The 1M+3 count costs time on 2 cores: it runs with one type of each staging path (float32
// direct, bfloat16 widened to float, int32 integer) instead of all twelve.
bool big_count_type(DataType t) {
  return t == DataType::float32 || t == DataType::bfloat16 || t == DataType::int32;
}

bool wanted(DataType t, std::size_t count) {
  return count <= max_count() && (count != kBig || big_count_type(t));
}

bool in_place_here(Place p, int rank) {
  return p == Place::in_place || (p == Place::mixed && rank % 2 == 1);
}

// The reduction inputs (grid.h). avg is sum times (1/n) in the accumulation type: float for
// float16, bfloat16 and float32 (Buffer::check then rounds once to the 16-bit type), double for
// float64.
double reduce_input(const Case& c, int r, std::size_t i) {
  return synk_test::reduce_input(c.op, c.dtype, r, i);
}

double reduce_expected(const Case& c, int n, std::size_t i) {
  const double acc = synk_test::reduce_over_ranks(c.op, c.dtype, n, i);
  if (c.op != ReduceOp::avg) return acc;
  if (c.dtype == DataType::float64) return acc * (1.0 / n);
  return static_cast<double>(static_cast<float>(acc) * (1.0f / static_cast<float>(n)));
}

std::string what(const Case& c, const char* buffer) {
  std::string s = "rank " + std::to_string(world().rank()) + " of " +
                  std::to_string(world().size()) + ", " + to_string(c.coll) + " " +
                  synk::to_string(c.dtype);
  if (c.coll == Coll::all_reduce || c.coll == Coll::reduce || c.coll == Coll::reduce_scatter) {
    s += std::string(" ") + synk::to_string(c.op);
  }
  s += " count " + std::to_string(c.count) + " " + to_string(c.place);
  if (c.coll == Coll::reduce || c.coll == Coll::broadcast || c.coll == Coll::gather ||
      c.coll == Coll::scatter) {
    s += " root " + std::to_string(root_of(c.root, world().size()));
  }
  return s + ", " + buffer;
}

std::string case_name(const Case& c) {
  std::string s = to_string(c.coll);
  if (c.coll == Coll::reduce || c.coll == Coll::broadcast || c.coll == Coll::gather ||
      c.coll == Coll::scatter) {
    s += c.root == Root::last ? "_rootlast" : "_root0";
  }
  s += std::string("_") + synk::to_string(c.dtype);
  if (c.coll == Coll::all_reduce || c.coll == Coll::reduce || c.coll == Coll::reduce_scatter) {
    s += std::string("_") + synk::to_string(c.op);
  }
  return s + "_n" + std::to_string(c.count) + "_" + to_string(c.place);
}

// ---- reductions -------------------------------------------------------------------------------

void run_all_reduce(const Case& c) {
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size();
  const auto mine = [&](std::size_t i) { return reduce_input(c, me, i); };
  const auto result = [&](std::size_t i) { return reduce_expected(c, n, i); };
  Buffer send(c.dtype, c.count);
  send.fill(mine);
  if (in_place_here(c.place, me)) {
    comm.all_reduce(send.data(), send.data(), c.count, c.dtype, c.op);
    EXPECT_TRUE(send.check(result, what(c, "buf")));
    return;
  }
  Buffer recv(c.dtype, c.count);
  recv.fill_value(kSentinel);
  comm.all_reduce(send.data(), recv.data(), c.count, c.dtype, c.op);
  EXPECT_TRUE(recv.check(result, what(c, "recv")));
  EXPECT_TRUE(send.check(mine, what(c, "send (must not change)")));
}

// Off the root, recv is unused: NCCL's convention, which synk documents, is that it is untouched.
void run_reduce(const Case& c) {
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size(), root = root_of(c.root, n);
  const auto mine = [&](std::size_t i) { return reduce_input(c, me, i); };
  const auto result = [&](std::size_t i) { return reduce_expected(c, n, i); };
  Buffer send(c.dtype, c.count);
  send.fill(mine);
  if (c.place == Place::in_place) {
    comm.reduce(send.data(), send.data(), c.count, c.dtype, c.op, root);
    if (me == root) {
      EXPECT_TRUE(send.check(result, what(c, "buf at the root")));
    } else {
      EXPECT_TRUE(send.check(mine, what(c, "buf off the root (must not change)")));
    }
    return;
  }
  Buffer recv(c.dtype, c.count);
  recv.fill_value(kSentinel);
  comm.reduce(send.data(), recv.data(), c.count, c.dtype, c.op, root);
  if (me == root) {
    EXPECT_TRUE(recv.check(result, what(c, "recv at the root")));
  } else {
    EXPECT_TRUE(recv.check([](std::size_t) { return kSentinel; },
                           what(c, "recv off the root (must not change)")));
  }
  EXPECT_TRUE(send.check(mine, what(c, "send (must not change)")));
}

// In place, recv is block `rank` of send; the other blocks are input and must stay as they were.
void run_reduce_scatter(const Case& c) {
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size();
  const std::size_t total = c.count * static_cast<std::size_t>(n);
  const std::size_t mine_from = c.count * static_cast<std::size_t>(me),
                    mine_to = mine_from + c.count;
  const auto input = [&](std::size_t k) { return reduce_input(c, me, k); };
  Buffer send(c.dtype, total);
  send.fill(input);
  if (in_place_here(c.place, me)) {
    comm.reduce_scatter(send.data(), send.at(mine_from), c.count, c.dtype, c.op);
    EXPECT_TRUE(send.check(
        [&](std::size_t k) {
          return k >= mine_from && k < mine_to ? reduce_expected(c, n, k) : input(k);
        },
        what(c, "send (block rank = result, other blocks unchanged)")));
    return;
  }
  Buffer recv(c.dtype, c.count);
  recv.fill_value(kSentinel);
  comm.reduce_scatter(send.data(), recv.data(), c.count, c.dtype, c.op);
  EXPECT_TRUE(recv.check([&](std::size_t j) { return reduce_expected(c, n, mine_from + j); },
                         what(c, "recv")));
  EXPECT_TRUE(send.check(input, what(c, "send (must not change)")));
}

// ---- data movement ----------------------------------------------------------------------------

void run_broadcast(const Case& c) {
  synk::Communicator& comm = world();
  const int me = comm.rank(), root = root_of(c.root, comm.size());
  const auto from_root = [&](std::size_t i) { return data(root, i); };
  Buffer buf(c.dtype, c.count);
  if (me == root) {
    buf.fill(from_root);
  } else {
    buf.fill_value(kSentinel);
  }
  comm.broadcast(buf.data(), c.count, c.dtype, root);
  EXPECT_TRUE(buf.check(from_root, what(c, "buf")));
}

void run_all_gather(const Case& c) {
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size();
  const std::size_t count = c.count, mine_from = count * static_cast<std::size_t>(me);
  const auto gathered = [&](std::size_t k) { return data(static_cast<int>(k / count), k % count); };
  const auto mine = [&](std::size_t i) { return data(me, i); };
  Buffer recv(c.dtype, count * static_cast<std::size_t>(n));
  recv.fill_value(kSentinel);
  if (in_place_here(c.place, me)) {
    recv.fill([&](std::size_t k) { return data(me, k - mine_from); }, mine_from, mine_from + count);
    comm.all_gather(recv.at(mine_from), recv.data(), count, c.dtype);
  } else {
    Buffer send(c.dtype, count);
    send.fill(mine);
    comm.all_gather(send.data(), recv.data(), count, c.dtype);
    EXPECT_TRUE(send.check(mine, what(c, "send (must not change)")));
  }
  EXPECT_TRUE(recv.check(gathered, what(c, "recv")));
}

// In place: the root's send is its own block of recv; off the root, recv may be null.
void run_gather(const Case& c) {
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size(), root = root_of(c.root, n);
  const std::size_t count = c.count, total = count * static_cast<std::size_t>(n);
  const auto gathered = [&](std::size_t k) { return data(static_cast<int>(k / count), k % count); };
  const auto mine = [&](std::size_t i) { return data(me, i); };
  const bool in_place = c.place == Place::in_place;
  if (me == root) {
    Buffer recv(c.dtype, total);
    recv.fill_value(kSentinel);
    const std::size_t from = count * static_cast<std::size_t>(root);
    if (in_place) {
      recv.fill([&](std::size_t k) { return data(me, k - from); }, from, from + count);
      comm.gather(recv.at(from), recv.data(), count, c.dtype, root);
    } else {
      Buffer send(c.dtype, count);
      send.fill(mine);
      comm.gather(send.data(), recv.data(), count, c.dtype, root);
      EXPECT_TRUE(send.check(mine, what(c, "send (must not change)")));
    }
    EXPECT_TRUE(recv.check(gathered, what(c, "recv at the root")));
    return;
  }
  Buffer send(c.dtype, count);
  send.fill(mine);
  if (in_place) {
    comm.gather(send.data(), nullptr, count, c.dtype, root);
  } else {
    Buffer recv(c.dtype, total);
    recv.fill_value(kSentinel);
    comm.gather(send.data(), recv.data(), count, c.dtype, root);
    EXPECT_TRUE(recv.check([](std::size_t) { return kSentinel; },
                           what(c, "recv off the root (must not change)")));
  }
  EXPECT_TRUE(send.check(mine, what(c, "send (must not change)")));
}

// In place: the root's recv is its own block of send; off the root, send may be null.
void run_scatter(const Case& c) {
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size(), root = root_of(c.root, n);
  const std::size_t count = c.count, total = count * static_cast<std::size_t>(n);
  const auto blocks = [&](std::size_t k) { return data(static_cast<int>(k / count), k % count); };
  const auto mine = [&](std::size_t i) { return data(me, i); };
  const bool in_place = c.place == Place::in_place;
  if (me == root) {
    Buffer send(c.dtype, total);
    send.fill(blocks);
    if (in_place) {
      comm.scatter(send.data(), send.at(count * static_cast<std::size_t>(root)), count, c.dtype,
                   root);
    } else {
      Buffer recv(c.dtype, count);
      recv.fill_value(kSentinel);
      comm.scatter(send.data(), recv.data(), count, c.dtype, root);
      EXPECT_TRUE(recv.check(mine, what(c, "recv at the root")));
    }
    EXPECT_TRUE(send.check(blocks, what(c, "send (must not change)")));
    return;
  }
  Buffer recv(c.dtype, count);
  recv.fill_value(kSentinel);
  if (in_place) {
    comm.scatter(nullptr, recv.data(), count, c.dtype, root);
  } else {
    Buffer send(c.dtype, total);
    send.fill_value(kSentinel);
    comm.scatter(send.data(), recv.data(), count, c.dtype, root);
    EXPECT_TRUE(send.check([](std::size_t) { return kSentinel; },
                           what(c, "send off the root (must not change)")));
  }
  EXPECT_TRUE(recv.check(mine, what(c, "recv")));
}

// Block q of rank r's send holds data(r * n + q, i): every pair of ranks moves its own values.
// recv must be untouched where the sender's send is (they do not overlap: no in place).
void run_all_to_all(const Case& c) {
  synk::Communicator& comm = world();
  const int me = comm.rank(), n = comm.size();
  const std::size_t count = c.count, total = count * static_cast<std::size_t>(n);
  const auto block = [&](std::size_t k) { return static_cast<int>(k / count); };
  const auto sent = [&](std::size_t k) { return data(me * n + block(k), k % count); };
  const auto received = [&](std::size_t k) { return data(block(k) * n + me, k % count); };
  Buffer send(c.dtype, total), recv(c.dtype, total);
  send.fill(sent);
  recv.fill_value(kSentinel);
  comm.all_to_all(send.data(), recv.data(), count, c.dtype);
  EXPECT_TRUE(recv.check(received, what(c, "recv")));
  EXPECT_TRUE(send.check(sent, what(c, "send (must not change)")));
}

// ---- the grids --------------------------------------------------------------------------------

std::vector<Case> reduction_cases() {
  std::vector<Case> out;
  for (Coll coll : {Coll::all_reduce, Coll::reduce, Coll::reduce_scatter}) {
    for (Root root : {Root::first, Root::last}) {
      if (root == Root::last && coll != Coll::reduce) continue;
      for (DataType t : kAllTypes) {
        for (ReduceOp op : kAllOps) {
          if (op == ReduceOp::avg && !synk::is_floating(t)) continue;  // an error: AvgOnIntegers
          for (std::size_t count : kCounts) {
            if (!wanted(t, count)) continue;
            for (Place p : {Place::out_of_place, Place::in_place, Place::mixed}) {
              // Mixed is a per-rank choice only where in place is defined on every rank, and a
              // few types cover its code paths.
              if (p == Place::mixed && (coll == Coll::reduce || !big_count_type(t))) {
                continue;
              }
              out.push_back({coll, t, op, count, p, root});
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<Case> movement_cases() {
  std::vector<Case> out;
  for (Coll coll : {Coll::broadcast, Coll::all_gather, Coll::gather, Coll::scatter}) {
    for (Root root : {Root::first, Root::last}) {
      if (root == Root::last && coll == Coll::all_gather) continue;
      for (DataType t : kAllTypes) {
        for (std::size_t count : kCounts) {
          if (!wanted(t, count)) continue;
          for (Place p : {Place::out_of_place, Place::in_place, Place::mixed}) {
            if (coll == Coll::broadcast && p != Place::in_place) continue;  // one buffer only
            if (p == Place::mixed && (coll != Coll::all_gather || !big_count_type(t))) {
              continue;
            }
            out.push_back({coll, t, ReduceOp::sum, count, p, root});
          }
        }
      }
    }
  }
  for (DataType t : kAllTypes) {  // all_to_all: no root, no in place
    for (std::size_t count : kCounts) {
      if (!wanted(t, count)) continue;
      out.push_back({Coll::all_to_all, t, ReduceOp::sum, count, Place::out_of_place, Root::first});
    }
  }
  return out;
}

// gtest prints a failing test's parameter; the name says it all.
void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

class Grid : public ::testing::TestWithParam<Case> {};

TEST_P(Grid, ExactOnEveryRank) {
  const Case& c = GetParam();
  // Uniform across ranks, so no rank is left waiting in a collective.
  if (c.root == Root::last && world().size() == 1) GTEST_SKIP() << "root size-1 is root 0";
  switch (c.coll) {
    case Coll::all_reduce:
      run_all_reduce(c);
      break;
    case Coll::reduce:
      run_reduce(c);
      break;
    case Coll::reduce_scatter:
      run_reduce_scatter(c);
      break;
    case Coll::broadcast:
      run_broadcast(c);
      break;
    case Coll::all_gather:
      run_all_gather(c);
      break;
    case Coll::gather:
      run_gather(c);
      break;
    case Coll::scatter:
      run_scatter(c);
      break;
    case Coll::all_to_all:
      run_all_to_all(c);
      break;
  }
}

std::string grid_name(const ::testing::TestParamInfo<Case>& info) { return case_name(info.param); }

INSTANTIATE_TEST_SUITE_P(Reductions, Grid, ::testing::ValuesIn(reduction_cases()), grid_name);
INSTANTIATE_TEST_SUITE_P(DataMovement, Grid, ::testing::ValuesIn(movement_cases()), grid_name);

// A run configured for one backend's paths (ctest sets these) must really use that backend,
// or it passes without testing what it is named for.
TEST(Setup, BackendMatchesTheRun) {
  const std::string& b = world().backend();
  if (world().rank() == 0)
    std::printf("[setup] backend %s, %d node(s)\n", b.c_str(), world().num_nodes());
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  if (env("SYNK_BACKEND") == "mpi" || env("SYNK_BACKEND") == "shm") {
    EXPECT_EQ(
        b, world().num_nodes() > 1 && env("SYNK_BACKEND") == "shm" ? "hier" : env("SYNK_BACKEND"));
  }
  if (!env("SYNK_MPI_MAX_CHUNK").empty()) {
    EXPECT_THAT(b, ::testing::AnyOf("mpi", "hier"));
  }
  if (!env("SYNK_SHM_SLOT_BYTES").empty()) {
    EXPECT_THAT(b, ::testing::AnyOf("shm", "hier"));
  }
  if (std::atoi(env("SYNK_SIMULATE_NODES").c_str()) > 1 && world().size() > 1) {
    EXPECT_GT(world().num_nodes(), 1);
  }
}

}  // namespace
