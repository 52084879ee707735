// Faults of the shared-memory backend, with real processes (fork_harness.h): a rank killed in
// the middle of a collective, a rank that never arrives, mismatched calls, leftover and foreign
// segments, and no segment left behind by any of it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <thread>
#include <vector>

#include "backends/shm/segment.h"
#include "expect_refused.h"
#include "fork_harness.h"
#include "synk/error.h"

namespace synk::shm::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Runs fn, returns 0 when it throws synk::Error with `code` (reporting its message), 1 if it
// throws something else or nothing.
template <class Fn>
int expect_error(ErrorCode code, const std::function<void(const std::string&)>& report, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    report(e.what());
    return e.code() == code ? 0 : 1;
  } catch (const std::exception& e) {
    report(std::string("not a synk::Error: ") + e.what());
    return 1;
  }
  report("no error");
  return 1;
}

class ShmFaults : public NoSegmentLeft<> {};

TEST_F(ShmFaults, KilledRankMidCollectiveIsAnErrorOnTheOthers) {
  HarnessOptions opt;
  opt.timeout_s = 30;  // far beyond the detection time: the error must come from liveness
  opt.kill_rank = 1;
  opt.kill_after_ms = 300;
  const auto out = run_ranks(3, opt, [](Group& g, auto report) {
    std::vector<float> buf(1 << 20, 1.0f);  // 4 MiB: many steps per call
    return expect_error(ErrorCode::Remote, report, [&] {
      for (int i = 0; i < 1000000; ++i) {
        all_reduce(g, buf.data(), buf.data(), buf.size(), DataType::float32, ReduceOp::max);
      }
    });
  });
  EXPECT_TRUE(out[1].killed);
  for (int r : {0, 2}) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
    EXPECT_THAT(out[r].message, HasSubstr("all_reduce: rank 1"));
    EXPECT_THAT(out[r].message, HasSubstr("died"));
    EXPECT_LT(out[r].seconds, 10.0) << "detection took too long";
  }
}

TEST_F(ShmFaults, RankThatNeverArrivesIsATimeoutNamingIt) {
  HarnessOptions opt;
  opt.timeout_s = 1.0;
  const auto out = run_ranks(2, opt, [](Group& g, auto report) {
    if (g.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(3));  // alive, but never calls
      return 0;
    }
    std::vector<double> v(10, 1.0);
    return expect_error(ErrorCode::Timeout, report, [&] {
      all_reduce(g, v.data(), v.data(), v.size(), DataType::float64, ReduceOp::sum);
    });
  });
  EXPECT_EQ(out[0].exit_code, 0) << out[0].message;
  EXPECT_THAT(out[0].message, HasSubstr("all_reduce: rank 0 waited 1 s (SYNK_TIMEOUT) for rank 1"));
  EXPECT_LT(out[0].seconds, 2.9);
}

// A hier leader in its call's step between the nodes (outside the group) that makes no progress
// there: the rank waiting for it says where it is, and names no rank as not in the call (synkrun
// would blame that rank, whose node's leader it is).
TEST_F(ShmFaults, APeerStuckBetweenTheNodesIsNotSaidToHaveMissedTheCall) {
  HarnessOptions opt;
  opt.timeout_s = 1.0;
  const auto out = run_ranks(2, opt, [](Group& g, auto report) {
    std::vector<double> v(10, 1.0);
    if (g.rank() == 0) {
      g.set_outside(true);  // as hier's leader_part, then stuck inside MPI
      std::this_thread::sleep_for(std::chrono::seconds(3));
      return 0;
    }
    return expect_error(ErrorCode::Timeout, report, [&] {
      all_reduce(g, v.data(), v.data(), v.size(), DataType::float64, ReduceOp::sum);
    });
  });
  EXPECT_EQ(out[1].exit_code, 0) << out[1].message;
  EXPECT_THAT(out[1].message,
              HasSubstr("all_reduce: rank 1 waited 1 s (SYNK_TIMEOUT) for this call's step "
                        "between the nodes, where rank 0 has made no progress inside MPI"));
  EXPECT_THAT(out[1].message, Not(HasSubstr("has not reached")));
}

TEST_F(ShmFaults, MismatchedCountsFailOnEveryRankAndTheGroupStaysUsable) {
  const auto out = run_ranks(2, {}, [](Group& g, auto report) {
    std::vector<float> v(200, 1.0f);
    const std::size_t count = g.rank() == 0 ? 100 : 200;
    int rc = expect_error(ErrorCode::InvalidUsage, report, [&] {
      all_reduce(g, v.data(), v.data(), count, DataType::float32, ReduceOp::sum);
    });
    // Afterwards a matching call works and is exact.
    std::vector<float> w(300, static_cast<float>(g.rank() + 1));
    all_reduce(g, w.data(), w.data(), w.size(), DataType::float32, ReduceOp::sum);
    if (std::any_of(w.begin(), w.end(), [](float x) { return x != 3.0f; })) rc = 2;
    return rc;
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(out[r].exit_code, 0) << out[r].message;
    EXPECT_THAT(out[r].message,
                HasSubstr("mismatched calls: rank 0 called all_reduce(count 100, float32, sum), "
                          "rank 1 called all_reduce(count 200, float32, sum)"));
  }
}

// Rank 0's calls are small enough for the entries, rank 1's go through the slots: the ranks
// take different paths in the same step, and the mismatch is still found on both.
TEST_F(ShmFaults, MismatchedCountsAcrossTheEntriesAndTheSlotsFailOnEveryRank) {
  const auto out = run_ranks(2, {}, [](Group& g, auto report) {
    std::vector<float> send(400, 1.0f), recv(800);
    std::string messages;  // both errors', reported together
    const auto keep = [&](const std::string& text) { messages += text + "\n"; };
    int rc = expect_error(ErrorCode::InvalidUsage, keep, [&] {
      const std::size_t count = g.rank() == 0 ? 100 : 200;  // 400 B against 800 B a rank
      all_gather(g, send.data(), recv.data(), count, DataType::float32);
    });
    rc |= expect_error(ErrorCode::InvalidUsage, keep, [&] {
      const std::size_t count = g.rank() == 0 ? 50 : 100;  // 400 B against 800 B in all
      reduce_scatter(g, send.data(), recv.data(), count, DataType::float32, ReduceOp::sum);
    });
    all_gather(g, send.data(), recv.data(), 200, DataType::float32);  // the slots, and exact
    if (std::any_of(recv.begin(), recv.begin() + 400, [](float x) { return x != 1.0f; })) rc = 2;
    report(messages);
    return rc;
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(out[r].exit_code, 0) << out[r].message;
    EXPECT_THAT(out[r].message, HasSubstr("rank 0 called all_gather(count 100"));
    EXPECT_THAT(out[r].message, HasSubstr("rank 1 called all_gather(count 200"));
    EXPECT_THAT(out[r].message, HasSubstr("rank 0 called reduce_scatter(count 50"));
    EXPECT_THAT(out[r].message, HasSubstr("rank 1 called reduce_scatter(count 100"));
  }
}

TEST_F(ShmFaults, AllReduceAgainstBroadcastFailsOnEveryRank) {
  const auto out = run_ranks(3, {}, [](Group& g, auto report) {
    std::vector<std::int32_t> v(64, 7);
    return expect_error(ErrorCode::InvalidUsage, report, [&] {
      if (g.rank() == 2) {
        broadcast(g, v.data(), v.size(), DataType::int32, 0);
      } else {
        all_reduce(g, v.data(), v.data(), v.size(), DataType::int32, ReduceOp::sum);
      }
    });
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
    EXPECT_THAT(out[r].message, HasSubstr("rank 2 called broadcast(count 64, int32, root 0)"));
  }
}

// Every rank names both counts (the others said only "says otherwise"), and the group stays in
// step for the next call.
TEST_F(ShmFaults, GathervCountsDisagreeingWithTheRootFailEverywhere) {
  const auto out = run_ranks(3, {}, [](Group& g, auto report) {
    std::vector<std::uint8_t> send(10, 1), recv(30);
    const std::vector<std::size_t> counts = {10, 5, 10};  // rank 1 really sends 10
    int rc = expect_error(ErrorCode::InvalidUsage, report, [&] {
      gatherv(g, send.data(), 10, recv.data(), counts, DataType::uint8, 2);
    });
    std::vector<int> v(4, g.rank());
    all_reduce(g, v.data(), v.data(), v.size(), DataType::int32, ReduceOp::sum);
    if (v != std::vector<int>(4, 3)) rc = 2;
    return rc;
  });
  for (int r : {0, 1, 2}) {
    EXPECT_EQ(out[r].exit_code, 0) << out[r].message;
    EXPECT_THAT(out[r].message,
                HasSubstr("gatherv: rank 1 sends 10 elements but the root's recv_counts[1] is 5"));
  }
}

// A bad argument on one rank only (here: the root's recv_counts) fails the call on every rank,
// and the group stays in step for the next call.
TEST_F(ShmFaults, ArgumentsRejectedOnOneRankFailTheCallEverywhere) {
  const auto out = run_ranks(3, {}, [](Group& g, auto report) {
    std::vector<float> v(10, 1.0f), all(30);
    const std::vector<std::size_t> counts = {10, 10, 10};
    int rc = g.rank() == 0 ? expect_error(ErrorCode::InvalidArgument, report, [&] {
      g.reject(detail::Collective::gatherv, ErrorCode::InvalidArgument,
               "gatherv: recv_counts has 2 entries at the root, expected one per rank (3)");
    })
                           : expect_error(ErrorCode::Remote, report, [&] {
                               gatherv(g, v.data(), 10, all.data(), counts, DataType::float32, 0);
                             });
    all_reduce(g, v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
    if (v[0] != 3.0f || v[9] != 3.0f) rc = 2;
    return rc;
  });
  EXPECT_EQ(out[0].exit_code, 0) << out[0].message;
  EXPECT_THAT(out[0].message, HasSubstr("recv_counts has 2 entries"));
  for (int r : {1, 2}) {
    EXPECT_EQ(out[r].exit_code, 0) << out[r].message;
    EXPECT_THAT(out[r].message,
                HasSubstr("gatherv: rank 0 rejected its arguments: gatherv: recv_counts has 2"));
  }
}

// Rank 1 rejects a large scatter, which rank 0 begins by cross-memory attach (a step begun with
// settle, where a rejection's begins with next_step): afterwards both still pick the same slots,
// so slot calls stay exact (they read the other set, stale data, with no error).
TEST_F(ShmFaults, ARejectionAgainstACrossMemoryAttachLeavesTheSlotsInStep) {
  HarnessOptions opt;
  opt.cma_min_bytes = 1;  // every eligible call by cross-memory attach
  const auto out = run_ranks(2, opt, [](Group& g, auto report) {
    constexpr std::size_t kBlock = 1 << 18;  // floats a rank: 1 MiB
    std::vector<float> send(2 * kBlock, 1.0f), recv(kBlock);
    int rc = g.rank() == 1 ? expect_error(ErrorCode::InvalidArgument, report, [&] {
      g.reject(detail::Collective::scatter, ErrorCode::InvalidArgument, "scatter: recv is null");
    })
                           : expect_error(ErrorCode::Remote, report, [&] {
                               scatter(g, send.data(), recv.data(), kBlock, DataType::float32, 0);
                             });
    std::vector<float> mine(20000), all(40000);  // 80 KB a rank: the slots
    for (int call = 0; call < 6 && rc == 0; ++call) {
      std::fill(mine.begin(), mine.end(), static_cast<float>(100 * call + g.rank()));
      all_gather(g, mine.data(), all.data(), mine.size(), DataType::float32);
      for (int r = 0; r < 2; ++r) {
        if (all[static_cast<std::size_t>(r) * mine.size() + 7] != 100.0f * call + r) rc = 2;
      }
    }
    return rc;
  });
  for (int r : {0, 1}) EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
}

// Rank 1 rejects a 1 MiB broadcast, a collective whose way is measured: it counts the call as
// rank 0 does, so the trial that starts 64 such calls later starts on both (it put rank 0 a step
// ahead for good: every later call a mismatch), and every broadcast after it is exact.
TEST_F(ShmFaults, ARejectedMeasuredCallKeepsTheTrialsInStep) {
  const auto out = run_ranks(2, {}, [](Group& g, auto report) {
    std::vector<float> buf(1 << 18);  // 1 MiB
    int rc = g.rank() == 1 ? expect_error(ErrorCode::InvalidArgument, report, [&] {
      detail::CollArgs a;
      a.coll = detail::Collective::broadcast;
      a.recv = buf.data();
      a.count = buf.size();
      a.dtype = DataType::float32;
      g.reject(a, ErrorCode::InvalidArgument, "broadcast: a rejected argument");
    })
                           : expect_error(ErrorCode::Remote, report, [&] {
                               broadcast(g, buf.data(), buf.size(), DataType::float32, 0);
                             });
    for (int call = 0; call < 300 && rc == 0; ++call) {
      const int root = call % 2;
      std::fill(buf.begin(), buf.end(), g.rank() == root ? static_cast<float>(call) : -1.0f);
      try {
        broadcast(g, buf.data(), buf.size(), DataType::float32, root);
      } catch (const Error& e) {
        report("call " + std::to_string(call) + ": " + e.what());
        return 3;
      }
      if (buf[0] != static_cast<float>(call) || buf.back() != static_cast<float>(call)) rc = 2;
    }
    return rc;
  });
  for (int r : {0, 1}) EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
}

// A rank that closed the group (destroyed its communicator, or finalized MPI) after some calls,
// while the others wait for it in one more: they fail at once, saying so, where they waited
// SYNK_TIMEOUT for it and were told it had "not reached this call". The calls before (many
// slot steps each), which the others may still be finishing as it closes, end well.
TEST_F(ShmFaults, ARankThatClosedTheGroupFailsTheOthersAtOnce) {
  HarnessOptions opt;
  opt.timeout_s = 30;
  const auto out = run_ranks(3, opt, [](Group& g, auto report) {
    std::vector<double> v(100000, 1.0);
    for (int i = 0; i < 3; ++i) {
      all_reduce(g, v.data(), v.data(), v.size(), DataType::float64, ReduceOp::sum);
    }
    if (v.front() != 27.0 || v.back() != 27.0) return 2;
    if (g.rank() == 1) {
      g.close();
      std::this_thread::sleep_for(std::chrono::seconds(4));  // alive, but makes no more calls
      return 0;
    }
    return expect_error(ErrorCode::InvalidUsage, report, [&] {
      all_reduce(g, v.data(), v.data(), v.size(), DataType::float64, ReduceOp::sum);
    });
  });
  EXPECT_EQ(out[1].exit_code, 0) << out[1].message;
  for (int r : {0, 2}) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
    EXPECT_THAT(out[r].message,
                HasSubstr("all_reduce: rank 1 closed this communicator (destroyed it, or called "
                          "MPI_Finalize) before it reached this call; rank " +
                          std::to_string(r) + " was waiting for it"));
    EXPECT_LT(out[r].seconds, 3.0) << "rank " << r;
  }
}

// A rank whose program ends after it closed the group (an exception or sys.exit on its way
// out): the others wait a moment for its process to end, then name it as the one that exited,
// so that mpirun sees its exit code first.
TEST_F(ShmFaults, ARankThatClosedTheGroupAndExitedIsNamedAsExited) {
  HarnessOptions opt;
  opt.timeout_s = 30;
  const auto out = run_ranks(3, opt, [](Group& g, auto report) {
    std::vector<double> v(1000, 1.0);
    all_reduce(g, v.data(), v.data(), v.size(), DataType::float64, ReduceOp::sum);
    if (g.rank() == 1) {
      g.close();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the rest of its exit
      return 3;
    }
    return expect_error(ErrorCode::Remote, report, [&] {
      all_reduce(g, v.data(), v.data(), v.size(), DataType::float64, ReduceOp::sum);
    });
  });
  EXPECT_EQ(out[1].exit_code, 3) << out[1].message;
  for (int r : {0, 2}) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
    EXPECT_THAT(out[r].message, HasSubstr("all_reduce: rank 1 (pid "));
    EXPECT_THAT(out[r].message, HasSubstr(") exited before it reached this call; rank " +
                                          std::to_string(r) + " was waiting for it"));
    EXPECT_LT(out[r].seconds, 3.0) << "rank " << r;
  }
}

// A rank that waited past SYNK_TIMEOUT for a late one and then closed the group is named as
// having given up after a failure: the late rank was told that rank 0 "closed this communicator
// ... before it reached this call", a call-order bug that was not there.
TEST_F(ShmFaults, ARankThatTimedOutAndClosedIsNamedAsHavingGivenUp) {
  HarnessOptions opt;
  opt.timeout_s = 1;
  const auto out = run_ranks(2, opt, [](Group& g, auto report) {
    std::vector<double> v(1 << 20, 1.0);  // many steps: the late rank waits for rank 0's next
    const auto sum = [&] {
      all_reduce(g, v.data(), v.data(), v.size(), DataType::float64, ReduceOp::sum);
    };
    if (g.rank() == 0) {
      const int rc = expect_error(ErrorCode::Timeout, report, sum);
      g.close();
      std::this_thread::sleep_for(std::chrono::seconds(5));  // alive: in MPI_Finalize, say
      return rc;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // well past rank 0's 1 s
    return expect_error(ErrorCode::Remote, report, sum);
  });
  EXPECT_EQ(out[0].exit_code, 0) << out[0].message;
  EXPECT_THAT(out[0].message, HasSubstr("rank 0 waited 1 s (SYNK_TIMEOUT) for rank 1"));
  EXPECT_EQ(out[1].exit_code, 0) << out[1].message;
  EXPECT_THAT(out[1].message, HasSubstr("all_reduce: rank 0 gave up on this communicator after "
                                        "a call of its failed, and closed it; rank 1 was "
                                        "waiting for it"));
  EXPECT_LT(out[1].seconds, 4.5);  // 2.5 s late, and up to 1 s to see whether rank 0 exits
}

// Rank 0 waits for rank 1, alive but elsewhere, while rank 2 has died: the call can never end,
// and the error names rank 2 at once, not rank 1 after SYNK_TIMEOUT.
TEST_F(ShmFaults, ARankThatDiedIsNamedWhileAnotherIsWaitedFor) {
  HarnessOptions opt;
  opt.timeout_s = 30;
  const auto out = run_ranks(3, opt, [](Group& g, auto report) {
    if (g.rank() == 2) raise(SIGKILL);
    if (g.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(4));  // alive, but never calls
      return 0;
    }
    std::vector<double> v(10, 1.0);
    return expect_error(ErrorCode::Remote, report, [&] {
      all_reduce(g, v.data(), v.data(), v.size(), DataType::float64, ReduceOp::sum);
    });
  });
  EXPECT_TRUE(out[2].killed);
  EXPECT_EQ(out[0].exit_code, 0) << out[0].message;
  EXPECT_THAT(out[0].message, HasSubstr("all_reduce: rank 2 (pid "));
  EXPECT_THAT(out[0].message, HasSubstr("died; rank 0 was waiting for it"));
  EXPECT_LT(out[0].seconds, 3.0);
}

// Four ranks on two cores: spinning ranks must yield, and every result stays exact.
TEST_F(ShmFaults, FourRanksOnTwoCoresAreExact) {
  HarnessOptions opt;
  opt.slot_bytes = 4096;  // many steps per call
  const auto out = run_ranks(4, opt, [](Group& g, auto report) {
    const int n = g.size();
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{50001}}) {
      std::vector<std::int64_t> v(count), sum(count), gathered(count * 4), rs(count);
      for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<std::int64_t>(i) * (g.rank() + 1);
      all_reduce(g, v.data(), sum.data(), count, DataType::int64, ReduceOp::sum);
      all_gather(g, v.data(), gathered.data(), count, DataType::int64);
      std::vector<std::int64_t> big(count * 4);
      for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::int64_t>(i) + g.rank();
      reduce_scatter(g, big.data(), rs.data(), count, DataType::int64, ReduceOp::max);
      for (std::size_t i = 0; i < count; ++i) {
        const auto ii = static_cast<std::int64_t>(i);
        if (sum[i] != ii * n * (n + 1) / 2 || gathered[3 * count + i] != ii * 4 ||
            rs[i] != static_cast<std::int64_t>(g.rank() * count + i) + n - 1) {
          report("wrong at count " + std::to_string(count) + " index " + std::to_string(i));
          return 1;
        }
      }
      g.barrier();
    }
    return 0;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
}

TEST_F(ShmFaults, LeftoverSegmentOfACrashedJobDoesNotDisturbANewOne) {
  // What a crashed job could leave: a segment with synk's prefix, full of garbage.
  const std::string stale = std::string("/") + kSegmentPrefix + "000000000000000000000000";
  const int fd = shm_open(stale.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
  void* p = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  std::memset(p, 0xff, 1 << 20);
  munmap(p, 1 << 20);
  close(fd);

  const auto out = run_ranks(2, {}, [](Group& g, auto report) {
    std::vector<float> v(5000, 2.0f);
    all_reduce(g, v.data(), v.data(), v.size(), DataType::float32, ReduceOp::prod);
    if (v.front() != 4.0f || v.back() != 4.0f) {
      report("wrong");
      return 1;
    }
    return 0;
  });
  EXPECT_EQ(out[0].exit_code, 0) << out[0].message;
  EXPECT_EQ(out[1].exit_code, 0) << out[1].message;
  // The new job neither used nor removed it: it is still there, and only now removed.
  EXPECT_EQ(shm_unlink(stale.c_str()), 0);
}

TEST(ShmSegment, NewSegmentsAreUniqueModeSixHundredAndGoneAfterUnlink) {
  Segment a = Segment::create(8192), b = Segment::create(8192);
  EXPECT_NE(a.name(), b.name());
  EXPECT_EQ(a.name().size(), 1 + std::string(kSegmentPrefix).size() + 24);
  struct stat st {};
  const int fd = shm_open(a.name().c_str(), O_RDONLY, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fstat(fd, &st), 0);
  close(fd);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string name = a.name();
  a.unlink();
  EXPECT_LT(shm_open(name.c_str(), O_RDONLY, 0), 0);
}

TEST(ShmSegment, ASegmentWithOtherRightsIsRefused) {
  Segment mine = Segment::create(8192);
  const int fd = shm_open(mine.name().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchmod(fd, 0644), 0);
  expect_refused([&] { Segment::open(mine.name(), 8192); }, ErrorCode::InvalidUsage, "mode 0644",
                 "a 0644 segment was used");
  if (geteuid() == 0) {  // only root can give a segment to another user
    ASSERT_EQ(fchmod(fd, 0600), 0);
    ASSERT_EQ(fchown(fd, 65534, 65534), 0);
    expect_refused([&] { Segment::open(mine.name(), 8192); }, std::nullopt, "owner uid 65534",
                   "another user's segment was used");
  }
  close(fd);
}

}  // namespace
}  // namespace synk::shm::testing
