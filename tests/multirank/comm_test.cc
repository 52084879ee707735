// The Communicator itself: rank, size and node layout (real, or simulated with
// SYNK_SIMULATE_NODES), split, adopting the caller's MPI_Comm, and backend choice.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mpi_test.h"

namespace {

using synk::DataType;
using synk::ReduceOp;
using synk_test::world;
using ::testing::HasSubstr;

int mpi_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int mpi_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// The node count the test was started with: every rank runs on this one machine, which synk
// splits into SYNK_SIMULATE_NODES fake nodes when the variable is set.
int simulated_nodes() {
  const char* v = std::getenv("SYNK_SIMULATE_NODES");
  return v && *v ? std::atoi(v) : 1;
}

std::int64_t sum_of_ranks_with_parity(int parity, int size) {
  std::int64_t s = 0;
  for (int r = parity; r < size; r += 2) s += r;
  return s;
}

TEST(Comm, RankAndSizeAreMpis) {
  EXPECT_EQ(world().rank(), mpi_rank());
  EXPECT_EQ(world().size(), mpi_size());
}

// Gathers (node, local_rank, local_size, num_nodes) from every rank, so each rank checks the
// whole layout, not just its own view of it.
TEST(Comm, NodeLayoutIsConsistent) {
  synk::Communicator& comm = world();
  const int n = comm.size(), k = simulated_nodes();
  EXPECT_EQ(comm.num_nodes(), std::min(k, n));
  std::vector<std::int32_t> mine = {comm.node(), comm.local_rank(), comm.local_size(),
                                    comm.num_nodes()};
  const std::vector<std::int32_t> all = comm.all_gather(std::span<const std::int32_t>(mine));
  const auto field = [&](int r, int f) {
    return all[static_cast<std::size_t>(r) * 4 + static_cast<std::size_t>(f)];
  };
  int first_of_node = 0, smallest = n, largest = 0;
  for (int r = 0; r < n; ++r) {
    if (r > 0 && field(r, 0) != field(r - 1, 0)) {
      // Nodes are contiguous blocks in rank order, numbered by their first rank.
      EXPECT_EQ(field(r, 0), field(r - 1, 0) + 1) << "rank " << r << " starts a node out of order";
      first_of_node = r;
    }
    int same = 0;
    for (int q = 0; q < n; ++q) same += field(q, 0) == field(r, 0) ? 1 : 0;
    EXPECT_EQ(field(r, 1), r - first_of_node) << "local rank of rank " << r;
    EXPECT_EQ(field(r, 2), same) << "local size of rank " << r;
    EXPECT_EQ(field(r, 3), comm.num_nodes()) << "num_nodes of rank " << r;
    smallest = std::min(smallest, same);
    largest = std::max(largest, same);
  }
  EXPECT_EQ(field(0, 0), 0);
  EXPECT_EQ(field(n - 1, 0), comm.num_nodes() - 1);
  EXPECT_LE(largest - smallest, 1) << "simulated nodes should be as even as possible";
  if (k == 1) {
    EXPECT_EQ(comm.node(), 0);
    EXPECT_EQ(comm.local_size(), n);
    EXPECT_EQ(comm.local_rank(), comm.rank());
  }
}

// The parts of a split choose their backend again, from the parent's request and their own
// layout: "mpi" stays mpi; auto gives shm to a part on one node and hier to one across nodes.
class Split : public ::testing::TestWithParam<std::string> {};

TEST_P(Split, ByParityReducesOnlyItsHalf) {
  synk::Communicator comm(MPI_COMM_WORLD, synk::CommOptions{GetParam()});
  const int me = comm.rank(), n = comm.size(), parity = me % 2;
  synk::Communicator half = comm.split(parity, me);
  EXPECT_EQ(half.size(), parity == 0 ? (n + 1) / 2 : n / 2);
  EXPECT_EQ(half.rank(), me / 2);
  const std::string want = GetParam() == "mpi" ? "mpi" : half.num_nodes() == 1 ? "shm" : "hier";
  EXPECT_EQ(half.backend(), want) << "half on " << half.num_nodes() << " node(s)";
  std::vector<std::int64_t> v(1000, me);
  half.all_reduce(v);
  EXPECT_THAT(v, ::testing::Each(sum_of_ranks_with_parity(parity, n)));

  // The key orders the new ranks.
  synk::Communicator reversed = comm.split(0, -me);
  EXPECT_EQ(reversed.rank(), n - 1 - me);
  std::vector<std::int32_t> r = {reversed.rank()};
  reversed.broadcast(r, 0);
  EXPECT_EQ(r[0], 0);

  // A negative color on the last rank only: an error on every rank (the others hung in
  // MPI_Comm_split). MPI_UNDEFINED leaves that rank out, with an error that says so.
  auto code_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const synk::Error& e) {
      return static_cast<int>(e.code());
    }
    return -1;
  };
  EXPECT_EQ(code_of([&] { (void)comm.split(me == n - 1 ? -2 : 0, me); }),
            static_cast<int>(synk::ErrorCode::InvalidArgument));
  const int out = code_of([&] {
    synk::Communicator part = comm.split(me == n - 1 && n > 1 ? MPI_UNDEFINED : 0, me);
    EXPECT_EQ(part.size(), n > 1 ? n - 1 : 1);
  });
  EXPECT_EQ(out, me == n - 1 && n > 1 ? static_cast<int>(synk::ErrorCode::InvalidUsage) : -1);
  EXPECT_TRUE(synk_test::still_usable(comm));
}

std::string request_name(const ::testing::TestParamInfo<std::string>& p) { return p.param; }

INSTANTIATE_TEST_SUITE_P(Requests, Split, ::testing::Values("mpi", "auto"), request_name);

TEST(Comm, AdoptsCallersCommAndLeavesItAlone) {
  const int me = mpi_rank(), n = mpi_size();
  MPI_Comm mine = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &mine), MPI_SUCCESS);
  {
    synk::Communicator c(mine);
    EXPECT_EQ(c.rank(), me / 2);
    EXPECT_FALSE(c.backend().empty());
    // synk works on its own duplicate: same group, different context.
    EXPECT_NE(c.mpi_comm(), mine);
    int cmp = MPI_UNEQUAL;
    MPI_Comm_compare(c.mpi_comm(), mine, &cmp);
    EXPECT_EQ(cmp, MPI_CONGRUENT);
    std::vector<std::int64_t> v(3, me);
    c.all_reduce(v);
    EXPECT_EQ(v[0], sum_of_ranks_with_parity(me % 2, n));
  }
  // Destroying synk's communicator neither freed the caller's nor finalized MPI, and did not
  // touch its error handler (synk sets MPI_ERRORS_RETURN on its duplicate only).
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 0);
  MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(mine, &eh);
  EXPECT_EQ(eh, MPI_ERRORS_ARE_FATAL);
  MPI_Errhandler_free(&eh);
  int one = 1, members = 0;
  ASSERT_EQ(MPI_Allreduce(&one, &members, 1, MPI_INT, MPI_SUM, mine), MPI_SUCCESS);
  EXPECT_EQ(members, me % 2 == 0 ? (n + 1) / 2 : n / 2);
  MPI_Comm_free(&mine);
}

// An intercommunicator is refused as such (it failed in MPI_Comm_split_type, a Backend
// error, and leaked synk's duplicate of it).
TEST(Comm, AnIntercommunicatorIsAnInvalidArgument) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "an intercommunicator needs two groups";
  MPI_Comm half = MPI_COMM_NULL, inter = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 77, &inter);
  const auto e = synk_test::caught([&] { synk::Communicator c(inter); });
  EXPECT_SYNK_ERROR(e, synk::ErrorCode::InvalidArgument);
  EXPECT_THAT(synk_test::message(e), HasSubstr("intercommunicator"));
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
  EXPECT_TRUE(synk_test::still_usable(world()));
}

TEST(Comm, AdoptsMpiCommSelf) {
  synk::Communicator self(MPI_COMM_SELF);
  EXPECT_EQ(self.rank(), 0);
  EXPECT_EQ(self.size(), 1);
  EXPECT_EQ(self.num_nodes(), 1);
  std::vector<double> v = {1.5, -2.0};
  self.all_reduce(v, ReduceOp::avg);
  EXPECT_EQ(v, (std::vector<double>{1.5, -2.0}));
}

TEST(Comm, DefaultConstructorWhenMpiIsAlreadyUp) {
  {
    synk::Communicator c;
    EXPECT_EQ(c.size(), mpi_size());
    EXPECT_TRUE(synk_test::still_usable(c));
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 0) << "a Communicator finalized MPI that the program had started";
}

TEST(Comm, MovedCommunicatorStillWorks) {
  synk::Communicator a(MPI_COMM_WORLD, synk::CommOptions{"mpi"});
  synk::Communicator b = std::move(a);
  EXPECT_TRUE(synk_test::still_usable(b));
  synk::Communicator c(MPI_COMM_SELF);
  c = std::move(b);
  EXPECT_EQ(c.size(), mpi_size());
  EXPECT_TRUE(synk_test::still_usable(c));
  // The moved-from ones say so (they dereferenced null: SIGSEGV).
  for (synk::Communicator* gone : {&a, &b}) {
    try {
      (void)gone->rank();
      ADD_FAILURE() << "rank() of a moved-from Communicator returned";
    } catch (const synk::Error& e) {
      EXPECT_EQ(e.code(), synk::ErrorCode::InvalidUsage);
      EXPECT_THAT(e.what(), ::testing::HasSubstr("moved from"));
    }
    std::vector<float> x(4, 1.0f);
    EXPECT_THROW(gone->all_reduce(x), synk::Error);
  }
}

// Every rank must agree on the backend, or their collectives would not meet.
void expect_same_on_every_rank(synk::Communicator& comm) {
  const std::string& name = comm.backend();
  std::vector<std::int32_t> mine(16, 0), lowest(16), highest(16);
  for (std::size_t i = 0; i < name.size() && i < mine.size(); ++i) mine[i] = name[i];
  comm.all_reduce(std::span<const std::int32_t>(mine), std::span<std::int32_t>(lowest),
                  ReduceOp::min);
  comm.all_reduce(std::span<const std::int32_t>(mine), std::span<std::int32_t>(highest),
                  ReduceOp::max);
  EXPECT_EQ(lowest, highest) << "ranks chose different backends; rank " << comm.rank() << " has "
                             << name;
}

TEST(Comm, MpiBackendOnRequest) {
  synk::Communicator m(synk::CommOptions{"mpi"});
  EXPECT_EQ(m.backend(), "mpi");
  EXPECT_EQ(m.device(), -1) << "a host backend has no device";
  expect_same_on_every_rank(m);
  EXPECT_TRUE(synk_test::still_usable(m));
}

// yield_when_waiting changes which MPI calls an mpi communicator makes (non-blocking ones for
// small calls), and those do not match the blocking ones: ranks that pass it differently are
// refused at the start, on every rank alike.
TEST(Comm, YieldWhenWaitingMustBeTheSameOnEveryRank) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  synk::CommOptions options{"mpi"};
  options.yield_when_waiting = world().rank() == 1;
  try {
    synk::Communicator m(MPI_COMM_WORLD, options);
    ADD_FAILURE() << "a communicator whose ranks yield differently was made";
  } catch (const synk::Error& e) {
    EXPECT_EQ(e.code(), synk::ErrorCode::InvalidUsage) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("CommOptions::yield_when_waiting differs across the ranks"));
    EXPECT_THAT(e.what(), HasSubstr("pass it alike on every rank"));
  }
  options.yield_when_waiting = true;
  synk::Communicator m(MPI_COMM_WORLD, options);
  EXPECT_TRUE(synk_test::still_usable(m));
}

// On mpi, gatherv and scatterv go point to point, and MPI takes a message shorter than its
// receive without a word: the root's recv_counts said 5, rank 1 sent 3, and the root kept two
// stale elements. The receiving side now names the disagreement (the sender's call succeeds).
TEST(Comm, MpiGathervAndScattervCountsThatDisagree) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  if (std::getenv("SYNK_CHECK_CALLS") != nullptr) GTEST_SKIP() << "SYNK_CHECK_CALLS checks first";
  synk::Communicator m(synk::CommOptions{"mpi"});
  const int me = m.rank();
  std::vector<std::size_t> counts(static_cast<std::size_t>(m.size()), 5);
  // The root's send holds every rank's 5 for scatterv (it read past 10 on 3 and 4 ranks).
  std::vector<int> send(5 * counts.size(), me + 1), recv(10 * counts.size(), -1);
  const std::size_t mine = me == 1 ? 3 : 5;
  const auto gathered = synk_test::caught(
      [&] { m.gatherv(send.data(), mine, recv.data(), counts, DataType::int32, 0); });
  if (me == 0) {
    ASSERT_TRUE(gathered.has_value());
    EXPECT_EQ(gathered->code(), synk::ErrorCode::InvalidUsage);
    EXPECT_THAT(synk_test::message(gathered),
                HasSubstr("gatherv: rank 1 sent 3 elements where this rank's counts say 5"));
  } else {
    EXPECT_FALSE(gathered.has_value()) << synk_test::message(gathered);
  }
  const std::size_t wanted = me == 1 ? 7 : 5;
  const auto scattered = synk_test::caught(
      [&] { m.scatterv(send.data(), counts, recv.data(), wanted, DataType::int32, 0); });
  if (me == 1) {
    ASSERT_TRUE(scattered.has_value());
    EXPECT_THAT(synk_test::message(scattered),
                HasSubstr("scatterv: rank 0 sent 5 elements where this rank's counts say 7"));
  } else {
    EXPECT_FALSE(scattered.has_value()) << synk_test::message(scattered);
  }
  EXPECT_TRUE(synk_test::still_usable(m));
}

// docs/architecture.md (The seam): auto is shm on one node and hierarchical across nodes (no GPU
// buffers here).
// shm asked for by name (what SYNK_BACKEND=shm does; the variable is read once per process, so
// CommOptions stands in for it) is the same choice.
TEST(Comm, AutoAndShmChooseByNodeCount) {
  const char* want = world().num_nodes() == 1 ? "shm" : "hier";
  for (const char* requested : {"auto", "shm"}) {
    synk::Communicator c(MPI_COMM_WORLD, synk::CommOptions{requested});
    EXPECT_EQ(c.backend(), want) << "requested " << requested << " on " << c.num_nodes()
                                 << " node(s)";
    EXPECT_EQ(c.device(), -1) << "a host backend has no device";
    expect_same_on_every_rank(c);
    EXPECT_TRUE(synk_test::still_usable(c));
  }
}

// synk/agreement.h: the lowest failing rank's whole text on every rank, over a Communicator's
// own calls and over plain MPI; nothing where no rank failed.
std::string long_text(int rank) {  // longer than any fixed buffer the sites used to have
  return "rank " + std::to_string(rank) + " says " + std::string(3000, 'x') + " end";
}

TEST(Agreement, NoRankFailedGivesNothing) {
  EXPECT_FALSE(synk::first_failure(world(), false, "unused").has_value());
  EXPECT_FALSE(synk::first_failure(MPI_COMM_WORLD, false, "unused").has_value());
}

TEST(Agreement, TheLowestFailingRanksWholeTextReachesEveryRank) {
  const int rank = world().rank(), size = world().size();
  const bool failed = rank == size - 1 || rank % 2 == 1;  // the lowest is 1, or 0 on one rank
  const int lowest = size == 1 ? 0 : 1;
  const std::optional<synk::RankFailure> over_comm =
      synk::first_failure(world(), failed, long_text(rank));
  ASSERT_TRUE(over_comm.has_value());
  EXPECT_EQ(over_comm->rank, lowest);
  EXPECT_EQ(over_comm->text, long_text(lowest));
  const std::vector<int> nodes = [] {
    std::vector<int> n(static_cast<std::size_t>(world().size()));
    const int mine = world().node();
    world().all_gather(&mine, n.data(), 1, DataType::int32);
    return n;
  }();
  EXPECT_EQ(over_comm->node, nodes[static_cast<std::size_t>(lowest)]);

  const std::optional<synk::RankFailure> over_mpi =
      synk::first_failure(MPI_COMM_WORLD, failed, long_text(rank), 40 + rank);
  ASSERT_TRUE(over_mpi.has_value());
  EXPECT_EQ(over_mpi->rank, lowest);
  EXPECT_EQ(over_mpi->node, 40 + lowest);
  EXPECT_EQ(over_mpi->text, long_text(lowest));
}

TEST(Agreement, TextFromTheRootWholeAndEmpty) {
  const int root = world().size() - 1;
  const std::string mine = world().rank() == root ? long_text(root) : "not this";
  EXPECT_EQ(synk::text_from(world(), root, mine), long_text(root));
  EXPECT_EQ(synk::text_from(MPI_COMM_WORLD, root, mine), long_text(root));
  EXPECT_EQ(synk::text_from(world(), 0, world().rank() == 0 ? "" : "x"), "");
}

// A second thread's blocking call while one is under way on the same communicator is refused on
// that rank (the ranks may take two threads' calls in different orders and mix them: wrong
// sums, silently); the first call, which the others join only once rank 0 has seen the refusal
// (a message of MPI's own), completes.
TEST(Comm, ASecondThreadsBlockingCallOnOneCommunicatorIsRefused) {
  synk::Communicator& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  constexpr int kGo = 4711;
  std::vector<float> v(4, 1.0f);
  if (comm.rank() != 0) {
    char go = 0;
    MPI_Recv(&go, 1, MPI_CHAR, 0, kGo, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    comm.all_reduce(std::span<float>(v));
  } else {
    std::atomic<bool> started{false};
    std::optional<synk::Error> first_error;
    std::thread first([&] {
      started = true;
      first_error = synk_test::caught([&] { comm.all_reduce(std::span<float>(v)); });
    });
    while (!started) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the first thread is in its call
    std::vector<float> w(4, 1.0f);
    const auto e = synk_test::caught([&] { comm.all_reduce(std::span<float>(w)); });
    for (int r = 1; r < comm.size(); ++r) {
      const char go = 1;
      MPI_Send(&go, 1, MPI_CHAR, r, kGo, MPI_COMM_WORLD);
    }
    first.join();
    EXPECT_FALSE(first_error.has_value()) << synk_test::message(first_error);
    ASSERT_TRUE(e.has_value()) << "the second thread's call was taken";
    EXPECT_EQ(e->code(), synk::ErrorCode::InvalidUsage);
    EXPECT_THAT(e->what(), HasSubstr("another thread is in a blocking call"));
  }
  EXPECT_EQ(v, std::vector<float>(4, static_cast<float>(comm.size())));
  comm.barrier();
}

}  // namespace
