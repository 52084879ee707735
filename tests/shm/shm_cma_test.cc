// The cross-memory-attach algorithms of shm::Group (algorithms/*_cma.cc), with real processes:
// exact results on 2 to 4 ranks, in place and not, the scatter's between calls that go through
// the slots and, forced, the broadcast's, gathers' and reductions' too (so the two paths keep the
// group in step); the fall-back to the slots when the kernel refuses process_vm_readv; a rank killed
// mid-copy.
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fork_harness.h"
#include "synk/error.h"

namespace synk::shm::testing {
namespace {

using ::testing::HasSubstr;

// Whether this kernel lets a child read its parent's memory (what the group's probe finds out
// between sibling ranks): where it does not, the CMA paths cannot run and the tests say so.
bool kernel_allows_cma() {
  static std::uint64_t word = 0x1234;
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    std::uint64_t got = 0;
    iovec l{&got, sizeof got}, r{&word, sizeof word};
    _exit(process_vm_readv(parent, &l, 1, &r, 1, 0) == sizeof got && got == 0x1234 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::int64_t value(int rank, std::size_t i) {
  return static_cast<std::int64_t>(i) * 1000 + rank;
}

// all_reduce and reduce (at the first and last rank, in place and not) of value(rank, i), checked
// element by element; 0 when all are right.
int check_reductions(Group& g, std::size_t count,
                     const std::function<int(const std::string&, std::size_t, std::int64_t,
                                             std::int64_t)>& fail) {
  const int n = g.size(), me = g.rank();
  const auto sum = [&](std::size_t i) {
    return static_cast<std::int64_t>(n) * value(0, i) + std::int64_t{n} * (n - 1) / 2;
  };
  for (bool in_place : {false, true}) {
    std::vector<std::int64_t> send(count), recv(count, -1);
    std::int64_t* src = in_place ? recv.data() : send.data();
    for (std::size_t i = 0; i < count; ++i) src[i] = value(me, i);
    all_reduce(g, src, recv.data(), count, DataType::int64, ReduceOp::sum);
    for (std::size_t i = 0; i < count; ++i) {
      if (recv[i] != sum(i)) return fail(in_place ? "all_reduce in place" : "all_reduce", i, recv[i], sum(i));
    }
    for (int root : {0, n - 1}) {
      std::vector<std::int64_t> out(count, -1);
      std::int64_t* from = in_place && me == root ? out.data() : send.data();
      for (std::size_t i = 0; i < count; ++i) from[i] = value(me, i);
      reduce(g, from, me == root ? out.data() : nullptr, count, DataType::int64, ReduceOp::sum,
             root);
      for (std::size_t i = 0; i < count && me == root; ++i) {
        if (out[i] != sum(i)) return fail("reduce root " + std::to_string(root), i, out[i], sum(i));
      }
    }
  }
  return 0;
}

// Runs scatter (through CMA when it is on) between broadcast, all_gather, gather, all_reduce and
// reduce (through the slots unless forced) on `g` for `count`, and checks each element; 0 when
// all are right.
int check_all(Group& g, std::size_t count, const std::function<void(const std::string&)>& report) {
  const int n = g.size(), me = g.rank();
  const auto N = static_cast<std::size_t>(n);
  auto fail = [&](const std::string& what, std::size_t i, std::int64_t got, std::int64_t want) {
    report(what + " count " + std::to_string(count) + " index " + std::to_string(i) + ": got " +
           std::to_string(got) + ", want " + std::to_string(want));
    return 1;
  };
  for (int root : {0, n - 1}) {
    std::vector<std::int64_t> b(count);
    for (std::size_t i = 0; i < count; ++i) b[i] = me == root ? value(root, i) : -1;
    broadcast(g, b.data(), count, DataType::int64, root);
    for (std::size_t i = 0; i < count; ++i) {
      if (b[i] != value(root, i)) return fail("broadcast root " + std::to_string(root), i, b[i], value(root, i));
    }
  }
  for (bool in_place : {false, true}) {
    std::vector<std::int64_t> send(count), recv(count * N, -1);
    std::int64_t* src = in_place ? recv.data() + static_cast<std::size_t>(me) * count : send.data();
    for (std::size_t i = 0; i < count; ++i) src[i] = value(me, i);
    all_gather(g, src, recv.data(), count, DataType::int64);
    for (std::size_t k = 0; k < count * N; ++k) {
      const std::int64_t want = value(static_cast<int>(k / count), k % count);
      if (recv[k] != want) return fail(in_place ? "all_gather in place" : "all_gather", k, recv[k], want);
    }
  }
  {
    const int root = n > 1 ? 1 : 0;
    std::vector<std::int64_t> send(count), recv(me == root ? count * N : 0, -1);
    for (std::size_t i = 0; i < count; ++i) send[i] = value(me, i);
    gather(g, send.data(), me == root ? recv.data() : nullptr, count, DataType::int64, root);
    for (std::size_t k = 0; k < recv.size(); ++k) {
      const std::int64_t want = value(static_cast<int>(k / count), k % count);
      if (recv[k] != want) return fail("gather", k, recv[k], want);
    }
  }
  for (bool in_place : {false, true}) {
    const int root = 0;
    std::vector<std::int64_t> send(me == root ? count * N : 0), recv(count, -1);
    for (std::size_t k = 0; k < send.size(); ++k) send[k] = value(static_cast<int>(k / count), k % count);
    std::int64_t* dst = in_place && me == root ? send.data() : recv.data();
    scatter(g, me == root ? send.data() : nullptr, dst, count, DataType::int64, root);
    for (std::size_t i = 0; i < count; ++i) {
      if (dst[i] != value(me, i)) return fail("scatter", i, dst[i], value(me, i));
    }
  }
  return check_reductions(g, count, fail);
}

// Every call of a chosen collective through cross-memory attach, as SYNK_SHM_ALGO forces.
ForcedAlgos all_cma() {
  ForcedAlgos f{};
  f.fill(ShmAlgo::cma);
  return f;
}

class ShmCma : public NoSegmentLeft<::testing::TestWithParam<int>> {};

TEST_P(ShmCma, CmaCallsAreExactBetweenSlotCalls) {
  const bool allowed = kernel_allows_cma();
  for (bool forced : {false, true}) {
    HarnessOptions opt;
    opt.cma_min_bytes = 1;  // every scatter with data takes the CMA path
    if (forced) opt.forced_algos = all_cma();  // and so do the chosen collectives
    const auto out = run_ranks(GetParam(), opt, [&](Group& g, auto report) {
      for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{4097}, std::size_t{300001}}) {
        if (check_all(g, count, report) != 0) return 1;
      }
      if (g.cma_on() != allowed) {
        report(std::string("cma_on() is ") + (g.cma_on() ? "true" : "false") + " but the kernel " +
               (allowed ? "allows" : "refuses") + " process_vm_readv");
        return 1;
      }
      return 0;
    });
    for (int r = 0; r < GetParam(); ++r) {
      EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << (forced ? " (chosen collectives too)" : "")
                                     << ": " << out[r].message;
    }
  }
  if (!allowed) GTEST_SKIP() << "this kernel refuses process_vm_readv between siblings: only the fall-back ran";
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmCma, ::testing::Values(2, 3, 4));

// Drops CAP_SYS_PTRACE (root could read anyone) and makes the process non-dumpable: then no
// other process of the same user may attach to it, which is what Yama or a container's
// seccomp policy does to synk on some machines.
bool refuse_attach() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  data[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
  data[CAP_SYS_PTRACE / 32].permitted &= ~(1u << (CAP_SYS_PTRACE % 32));
  if (syscall(SYS_capset, &hdr, data) != 0) return false;
  return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0;
}

TEST(ShmCmaRefused, TheGroupFallsBackToTheSlotsAndStaysExact) {
  const auto before = synk_segments();
  HarnessOptions opt;
  opt.cma_min_bytes = 1;
  opt.forced_algos = all_cma();
  const auto out = run_ranks(3, opt, [](Group& g, auto report) {
    if (!refuse_attach()) {
      report("could not drop CAP_SYS_PTRACE / dumpable");
      return 1;
    }
    g.barrier();  // every rank has refused before anyone probes
    for (std::size_t count : {std::size_t{7}, std::size_t{70001}}) {
      if (check_all(g, count, report) != 0) return 1;
    }
    if (g.cma_on()) {
      report("cma_on() is true although no rank can be attached");
      return 1;
    }
    return 0;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
  EXPECT_EQ(synk_segments(), before);
}

// Three ranks make large calls by cross-memory attach (`call(g, i)`, the i-th) until rank 1 is
// killed 300 ms in: the others must fail with a Remote error naming it, well within the
// deadline, and leave no segment behind.
void expect_the_others_notice_a_killed_rank(HarnessOptions opt,
                                            const std::function<void(Group&, int)>& call) {
  const auto before = synk_segments();
  opt.timeout_s = 30;  // far beyond the detection time: the error must come from liveness
  opt.kill_rank = 1;
  opt.kill_after_ms = 300;
  const auto out = run_ranks(3, opt, [&](Group& g, auto report) {
    try {
      for (int i = 0; i < 1000000; ++i) call(g, i);
    } catch (const Error& e) {
      report(e.what());
      return e.code() == ErrorCode::Remote ? 0 : 1;
    }
    report("no error");
    return 1;
  });
  EXPECT_TRUE(out[1].killed);
  for (int r : {0, 2}) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].message;
    EXPECT_THAT(out[r].message, HasSubstr("rank 1"));
    EXPECT_LT(out[r].seconds, 10.0) << "rank " << r << " took too long to notice";
  }
  EXPECT_EQ(synk_segments(), before);
}

TEST(ShmCmaFaults, ARankKilledDuringLargeScattersIsAnErrorOnTheOthers) {
  if (!kernel_allows_cma()) GTEST_SKIP() << "this kernel refuses process_vm_readv between siblings";
  HarnessOptions opt;
  opt.cma_min_bytes = 1;
  const std::size_t block = std::size_t{4} << 20;  // 16 MiB of floats per rank per call
  std::vector<float> send(3 * block, 1.0f), recv(block);
  expect_the_others_notice_a_killed_rank(opt, [&](Group& g, int i) {
    scatter(g, send.data(), recv.data(), block, DataType::float32, i % 3);
  });
}

TEST(ShmCmaFaults, ARankKilledDuringLargeBroadcastsIsAnErrorOnTheOthers) {
  if (!kernel_allows_cma()) GTEST_SKIP() << "this kernel refuses process_vm_readv between siblings";
  HarnessOptions opt;
  opt.forced_algos = all_cma();
  std::vector<float> buf(std::size_t{4} << 20, 1.0f);  // 16 MiB
  expect_the_others_notice_a_killed_rank(opt, [&](Group& g, int i) {
    broadcast(g, buf.data(), buf.size(), DataType::float32, i % 3);
  });
}

TEST(ShmCmaFaults, ARankKilledDuringLargeAllReducesIsAnErrorOnTheOthers) {
  if (!kernel_allows_cma()) GTEST_SKIP() << "this kernel refuses process_vm_readv between siblings";
  HarnessOptions opt;
  opt.forced_algos = all_cma();
  std::vector<float> send(std::size_t{4} << 20, 1.0f), recv(send.size());  // 16 MiB
  expect_the_others_notice_a_killed_rank(opt, [&](Group& g, int) {
    all_reduce(g, send.data(), recv.data(), send.size(), DataType::float32, ReduceOp::sum);
  });
}

}  // namespace
}  // namespace synk::shm::testing
