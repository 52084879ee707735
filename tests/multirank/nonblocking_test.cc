// Non-blocking collectives (Communicator::iall_reduce, ...): every collective against its
// blocking result for a few dtypes and counts, many calls outstanding at once, the order of
// non-blocking and blocking calls, Requests dropped early, a second thread, errors at wait(),
// and a progress thread that uses no CPU while idle. Run on every backend (CMakeLists.txt).
#include <gtest/gtest.h>
#include <synk/synk.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mpi_test.h"

namespace synk_test {
namespace {

using synk::DataType;
using synk::ReduceOp;
using synk::Request;

constexpr std::size_t kCounts[] = {0, 1, 7, 4097, 262147};
constexpr DataType kTypes[] = {DataType::int32, DataType::float32, DataType::float64};


// Element i of rank r's input: a small integer, exact in every type here.
double input(int r, std::size_t i) { return static_cast<double>((7 * r + i) % 31 + 1); }

std::vector<unsigned char> filled(DataType t, std::size_t n, int r) {
  std::vector<unsigned char> out(n * synk::size_of(t));
  for (std::size_t i = 0; i < n; ++i) {
    const double v = input(r, i);
    if (t == DataType::int32) {
      const auto x = static_cast<std::int32_t>(v);
      std::memcpy(out.data() + 4 * i, &x, 4);
    } else if (t == DataType::float32) {
      const auto x = static_cast<float>(v);
      std::memcpy(out.data() + 4 * i, &x, 4);
    } else {
      std::memcpy(out.data() + 8 * i, &v, 8);
    }
  }
  return out;
}

enum class Coll { all_reduce, reduce, broadcast, all_gather, gather, gatherv, scatter, scatterv,
                  reduce_scatter, all_to_all, barrier };
constexpr Coll kColls[] = {Coll::all_reduce, Coll::reduce,   Coll::broadcast,
                           Coll::all_gather, Coll::gather,   Coll::gatherv,
                           Coll::scatter,    Coll::scatterv, Coll::reduce_scatter,
                           Coll::all_to_all, Coll::barrier};

// One call's buffers on this rank, made alike for the blocking and the non-blocking run.
struct Case {
  Coll coll;
  DataType type;
  std::size_t count;
  std::vector<unsigned char> send, recv;
  std::vector<std::size_t> recv_counts;  // gatherv (scatterv): count + r from (to) rank r
};

Case make_case(Coll c, DataType t, std::size_t count) {
  synk::Communicator& comm = world();
  const auto n = static_cast<std::size_t>(comm.size());
  const std::size_t es = synk::size_of(t);
  Case k{c, t, count, {}, {}, {}};
  for (std::size_t r = 0; r < n; ++r) k.recv_counts.push_back(count + r);
  const std::size_t all_counts = std::accumulate(k.recv_counts.begin(), k.recv_counts.end(),
                                                 std::size_t{0});
  const std::size_t mine = count + static_cast<std::size_t>(comm.rank());
  const bool blocks_out = c == Coll::scatter || c == Coll::reduce_scatter || c == Coll::all_to_all;
  const std::size_t send_n = blocks_out ? count * n
                             : c == Coll::gatherv  ? mine
                             : c == Coll::scatterv ? all_counts
                                                   : count;
  const bool blocks_in = c == Coll::all_gather || c == Coll::gather || c == Coll::all_to_all;
  const std::size_t recv_n = blocks_in ? count * n
                             : c == Coll::gatherv  ? all_counts
                             : c == Coll::scatterv ? mine
                                                   : count;
  k.send = filled(t, send_n, comm.rank());
  k.recv.assign(std::max<std::size_t>(recv_n, 1) * es, 0xee);
  if (c == Coll::broadcast) k.recv = filled(t, count, comm.rank());
  return k;
}

Request start(Case& k, bool blocking) {
  synk::Communicator& comm = world();
  const int root = comm.size() - 1;
  const void* s = k.send.data();
  void* r = k.recv.data();
  const std::size_t n = k.count;
  const DataType t = k.type;
  switch (k.coll) {
    case Coll::all_reduce:
      if (blocking) return comm.all_reduce(s, r, n, t, ReduceOp::sum), Request();
      return comm.iall_reduce(s, r, n, t, ReduceOp::sum);
    case Coll::reduce:
      if (blocking) return comm.reduce(s, r, n, t, ReduceOp::max, root), Request();
      return comm.ireduce(s, r, n, t, ReduceOp::max, root);
    case Coll::broadcast:
      if (blocking) return comm.broadcast(r, n, t, root), Request();
      return comm.ibroadcast(r, n, t, root);
    case Coll::all_gather:
      if (blocking) return comm.all_gather(s, r, n, t), Request();
      return comm.iall_gather(s, r, n, t);
    case Coll::gather:
      if (blocking) return comm.gather(s, r, n, t, root), Request();
      return comm.igather(s, r, n, t, root);
    case Coll::gatherv: {
      const std::size_t mine = n + static_cast<std::size_t>(comm.rank());
      if (blocking) return comm.gatherv(s, mine, r, k.recv_counts, t, root), Request();
      return comm.igatherv(s, mine, r, k.recv_counts, t, root);
    }
    case Coll::scatter:
      if (blocking) return comm.scatter(s, r, n, t, root), Request();
      return comm.iscatter(s, r, n, t, root);
    case Coll::scatterv: {
      const std::size_t mine = n + static_cast<std::size_t>(comm.rank());
      if (blocking) return comm.scatterv(s, k.recv_counts, r, mine, t, root), Request();
      return comm.iscatterv(s, k.recv_counts, r, mine, t, root);
    }
    case Coll::reduce_scatter:
      if (blocking) return comm.reduce_scatter(s, r, n, t, ReduceOp::sum), Request();
      return comm.ireduce_scatter(s, r, n, t, ReduceOp::sum);
    case Coll::all_to_all:
      if (blocking) return comm.all_to_all(s, r, n, t), Request();
      return comm.iall_to_all(s, r, n, t);
    case Coll::barrier:
      if (blocking) return comm.barrier(), Request();
      return comm.ibarrier();
  }
  return Request();
}

TEST(Nonblocking, EveryCollectiveGivesTheBlockingResult) {
  for (Coll c : kColls) {
    for (DataType t : kTypes) {
      for (std::size_t count : kCounts) {
        Case blocking = make_case(c, t, count), nonblocking = make_case(c, t, count);
        start(blocking, true);
        Request req = start(nonblocking, false);
        req.wait();
        EXPECT_TRUE(req.test());
        ASSERT_EQ(blocking.recv, nonblocking.recv)
            << "collective " << static_cast<int>(c) << ", " << synk::to_string(t) << ", count "
            << count;
      }
    }
  }
}

TEST(Nonblocking, ManyCallsOutstandingThenWaitAll) {
  synk::Communicator& comm = world();
  const int n = comm.size();
  std::vector<std::vector<float>> bufs;
  std::vector<Request> reqs;
  for (int k = 0; k < 64; ++k) bufs.emplace_back(1 + 97 * k, static_cast<float>(comm.rank() + k));
  for (auto& b : bufs) reqs.push_back(comm.iall_reduce(b));
  synk::wait_all(reqs);
  for (int k = 0; k < 64; ++k) {
    const float want = static_cast<float>(n * (n - 1) / 2 + n * k);
    for (float v : bufs[static_cast<std::size_t>(k)]) ASSERT_EQ(v, want) << "call " << k;
  }
}

TEST(Nonblocking, WaitAnyReturnsACompletedCall) {
  synk::Communicator& comm = world();
  std::vector<std::vector<int>> bufs(8, std::vector<int>(1000, 1));
  std::vector<Request> reqs;
  for (auto& b : bufs) reqs.push_back(comm.iall_reduce(b));
  std::vector<bool> seen(reqs.size());
  for (std::size_t k = 0; k < reqs.size(); ++k) {
    const std::size_t i = synk::wait_any(reqs);
    ASSERT_LT(i, reqs.size());
    seen[i] = true;
    EXPECT_EQ(bufs[i][999], comm.size());
  }
  EXPECT_EQ(synk::wait_any(std::span<Request>()), 0u);
}

// An MPI_Waitany loop: each completed Request is retired, so the next wait_any returns another;
// size() once none is left. (It returned the first completed one again and again.)
TEST(Nonblocking, WaitAnyRetiresLikeMpiWaitany) {
  synk::Communicator& comm = world();
  std::vector<std::vector<int>> bufs(5, std::vector<int>(100, 1));
  std::vector<Request> reqs;
  for (auto& b : bufs) reqs.push_back(comm.iall_reduce(b));
  reqs.insert(reqs.begin() + 2, Request());  // a default one is skipped, as MPI_REQUEST_NULL
  std::vector<int> seen(reqs.size(), 0);
  for (std::size_t k = 0; k < bufs.size(); ++k) ++seen[synk::wait_any(reqs)];
  EXPECT_EQ(seen, (std::vector<int>{1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(synk::wait_any(reqs), reqs.size());
  for (const auto& b : bufs) EXPECT_EQ(b[99], comm.size());
}

TEST(Nonblocking, CallsRunInTheOrderIssuedWithBlockingOnes) {
  // Same buffer: the broadcast must land before the all_reduce reads it, and the all_reduce
  // (blocking) must wait for the broadcast issued before it.
  synk::Communicator& comm = world();
  std::vector<double> v(5000, comm.rank() == 0 ? 3.0 : -1.0);
  Request b = comm.ibroadcast(v, 0);
  comm.all_reduce(v);
  EXPECT_TRUE(b.test());
  for (double x : v) ASSERT_EQ(x, 3.0 * comm.size());
  // And a non-blocking call after a blocking one, then one more blocking.
  std::vector<double> w(7, 1.0);
  Request r = comm.iall_reduce(w);
  comm.barrier();
  r.wait();
  for (double x : w) ASSERT_EQ(x, comm.size());
}

TEST(Nonblocking, AllocWaitsForTheCallsIssuedBeforeIt) {
  // The shm backend adds a node buffer to tables that a call on the progress thread reads.
  synk::Communicator& comm = world();
  std::vector<float> v(200000, 1.0f);
  Request r = comm.iall_reduce(v);
  synk::NodeBuffer nb = comm.alloc(1 << 16);
  EXPECT_TRUE(r.test());
  EXPECT_EQ(v.back(), static_cast<float>(comm.size()));
  auto* mine = static_cast<float*>(nb.data());
  std::fill(mine, mine + 1000, 2.0f);
  comm.iall_reduce(mine, mine, 1000, DataType::float32, ReduceOp::sum).wait();
  EXPECT_EQ(mine[999], 2.0f * static_cast<float>(comm.size()));
}

TEST(Nonblocking, ARequestDroppedEarlyWaitsForItsCall) {
  synk::Communicator& comm = world();
  std::vector<std::int32_t> v(100000, 2);
  { Request dropped = comm.iall_reduce(v); }
  for (std::int32_t x : v) ASSERT_EQ(x, 2 * comm.size());
  // Copies share the call: only the last one waits.
  std::vector<std::int32_t> w(10, 1);
  Request a = comm.iall_reduce(w);
  Request copy = a;
  a = Request();
  copy.wait();
  EXPECT_EQ(w[9], comm.size());
}

TEST(Nonblocking, ACallCompletesWithoutAWait) {
  // The progress thread runs it (or, where MPI does not allow that thread, it ran at issue):
  // test() alone sees it complete. First many calls waited for at once, which their callers
  // run themselves: the progress thread then looks less often, but still soon enough.
  synk::Communicator& comm = world();
  std::vector<float> v(50000, 1.0f);
  for (int k = 0; k < 200; ++k) {
    comm.iall_reduce(v.data(), v.data(), 1, DataType::float32, ReduceOp::max).wait();
  }
  comm.barrier();
  Request r = comm.iall_reduce(v);
  const auto start = std::chrono::steady_clock::now();
  while (!r.test()) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2))
        << "the call did not run without a wait";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(v.back(), static_cast<float>(comm.size()));
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// Where the calls run: on the progress thread wherever they make no MPI call (shm without
// SYNK_CHECK_CALLS) or MPI lets a second thread call it; else on the caller's, at issue.
bool expect_background(const synk::Communicator& comm) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  const bool check_calls = env_or_empty("SYNK_CHECK_CALLS") == "1";
  return level == MPI_THREAD_MULTIPLE || (comm.backend() == "shm" && !check_calls);
}

TEST(Nonblocking, AnIssueReturnsBeforeALatePeerArrives) {
  synk::Communicator& comm = world();
  if (env_or_empty("SYNK_TEST_MPI_THREAD") == "synk") {  // synk initialized MPI (mpi_main.cc)
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    const bool serialized = env_or_empty("SYNK_MPI_THREADS") == "serialized";
    EXPECT_EQ(level, serialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE);
  }
  const bool background = expect_background(comm);
  ASSERT_EQ(synk::detail::runs_in_background(comm), background) << "on " << comm.backend();
  if (comm.size() == 1) GTEST_SKIP() << "one rank has no peer to wait for";
  using Clock = std::chrono::steady_clock;
  const bool late = comm.rank() == comm.size() - 1;
  std::vector<float> v(4096, 1.0f);
  if (late) std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const auto start = Clock::now();
  Request r = comm.iall_reduce(v);
  const double issue_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!late && background) {
    EXPECT_LT(issue_ms, 300.0) << "the issue waited for the late rank";
    EXPECT_FALSE(r.test()) << "complete before the late rank had issued";
  } else if (!late) {
    EXPECT_GT(issue_ms, 300.0) << "at issue, the call waits for the late rank";
    EXPECT_TRUE(r.test());
  }
  r.wait();
  EXPECT_EQ(v.back(), static_cast<float>(comm.size()));
}

TEST(Nonblocking, ADroppedRequestWaitsForALatePeer) {
  synk::Communicator& comm = world();
  std::vector<double> v(1000, 1.0);
  if (comm.rank() == comm.size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  { Request dropped = comm.iall_reduce(v); }
  for (double x : v) ASSERT_EQ(x, comm.size());
}

TEST(Nonblocking, DestroyingTheCommunicatorWaitsForItsCalls) {
  synk::Communicator part = world().split(0, world().rank());
  std::vector<std::int64_t> a(20000, 1), b(3, 2);
  Request ra = part.iall_reduce(a), rb = part.iall_reduce(b);
  part = synk::Communicator(MPI_COMM_WORLD);  // the first one goes, with its queue
  EXPECT_EQ(a.back(), world().size());
  EXPECT_EQ(b.back(), 2 * world().size());
  EXPECT_TRUE(ra.test());  // the Requests outlive it, complete
  rb.wait();
}

TEST(Nonblocking, DestroyingTheCommunicatorWhileAnotherThreadRunsItsCall) {
  std::optional<synk::Communicator> part;
  part.emplace(world().split(0, world().rank()));
  std::vector<float> v(1 << 16, 1.0f);
  // Calls waited for at once teach the progress thread to look rarely, so that the waiting
  // thread below takes the call and runs it itself.
  for (int i = 0; i < 40; ++i) part->iall_reduce(v).wait();
  std::fill(v.begin(), v.end(), 1.0f);
  const bool late = part->rank() == part->size() - 1;
  if (late) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  Request r = part->iall_reduce(v);
  std::thread waiter([&] { r.wait(); });
  if (!late) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  part.reset();  // must wait for the call the waiter runs, which waits for the late rank
  EXPECT_EQ(v.back(), static_cast<float>(world().size()));
  waiter.join();
  EXPECT_TRUE(r.test());
}

TEST(Nonblocking, IssuingWhileAnotherThreadWaits) {
  synk::Communicator& comm = world();
  std::vector<float> a(300000, 1.0f), b(300000, 2.0f);
  Request ra = comm.iall_reduce(a);
  std::thread waiter([&] { ra.wait(); });
  Request rb = comm.iall_reduce(b);
  rb.wait();
  waiter.join();
  EXPECT_EQ(a.back(), static_cast<float>(comm.size()));
  EXPECT_EQ(b.back(), 2.0f * static_cast<float>(comm.size()));
}

TEST(Nonblocking, ErrorsSurfaceAtWaitAndTheCommunicatorGoesOn) {
  // avg on an integer type is refused on every rank alike.
  synk::Communicator& comm = world();
  std::vector<std::int32_t> v(10, 1);
  Request r = comm.iall_reduce(v, ReduceOp::avg);
  try {
    r.wait();
    ADD_FAILURE() << "avg of int32 completed";
  } catch (const synk::Error& e) {
    EXPECT_EQ(e.code(), synk::ErrorCode::InvalidArgument) << e.what();
  }
  EXPECT_THROW(r.test(), synk::Error);  // the outcome stays
  Request after = comm.iall_reduce(v);
  after.wait();
  EXPECT_EQ(v[0], comm.size());
}

TEST(Nonblocking, TypedHelpersCheckTheirBlocks) {
  synk::Communicator& comm = world();
  const auto n = static_cast<std::size_t>(comm.size());
  std::vector<float> send(3, 1.0f), recv(3 * n), short_recv(3 * n + 1);
  comm.iall_gather(std::span<const float>(send), std::span<float>(recv)).wait();
  EXPECT_EQ(recv.back(), 1.0f);
  EXPECT_THROW(comm.iall_gather(std::span<const float>(send), std::span<float>(short_recv)),
               synk::Error);
  std::vector<float> blocks(4 * n, 2.0f), mine(4);
  comm.ireduce_scatter(std::span<const float>(blocks), std::span<float>(mine)).wait();
  EXPECT_EQ(mine[3], 2.0f * static_cast<float>(n));
}

// Wake-ups of every thread of this process so far (each thread's voluntary context switches).
long wakeups() {
  long total = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) total += std::stol(line.substr(24));
    }
  }
  return total;
}

TEST(Nonblocking, AnIdleProgressThreadSleeps) {
  // While calls come it looks every millisecond; a second after the last one it sleeps until
  // the next, and an idle program wakes for nothing.
  synk::Communicator& comm = world();
  std::vector<float> v(1000, 1.0f);
  for (int k = 0; k < 20; ++k) comm.iall_reduce(v).wait();
  comm.barrier();
  const auto count = [] {
    const long before = wakeups();
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    return wakeups() - before - 1;  // not this thread's own sleep
  };
  const long looking = count();
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  const long asleep = count();
  EXPECT_LT(asleep, 20) << "threads woke " << asleep << " times in 0.4 s of idling (" << looking
                        << " while looking)";
  comm.barrier();
}

}  // namespace
}  // namespace synk_test
