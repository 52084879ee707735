// A fork-per-rank harness for shm::Group (after gloo's MultiProcTest): the parent makes one
// anonymous segment, forks one process per rank, each runs the test body on its own Group,
// and reports an exit code and a message through a shared result table. Ranks can be killed
// mid-call.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/shm/shm_group.h"

namespace synk::shm::testing {

struct RankOutcome {
  int exit_code = -1;    // the body's return value, or 100 + signal when killed
  bool killed = false;   // ended by a signal
  std::string message;   // what the body reported (an exception's text, or "")
  double seconds = 0;    // from start until this rank ended
};

struct HarnessOptions {
  std::size_t slot_bytes = 64 * 1024;
  std::size_t cma_min_bytes = GroupConfig{}.cma_min_bytes;  // 1: every eligible call uses CMA
  ForcedAlgos forced_algos{};  // SYNK_SHM_ALGO's forced ways (algo_chooser.h)
  // Unset: the backend's default for the ranks run (default_root_reduces_bytes); 0: every
  // reduce of more than the entries on 3+ ranks goes through the result area.
  std::optional<std::size_t> root_reduces_bytes;
  // Unset: the backend's default for the ranks run (default_one_step_bytes).
  std::optional<std::size_t> one_step_bytes;
  double timeout_s = 10.0;
  StoreMode store_mode = GroupConfig{}.store_mode;  // ordinary: node buffers always offered
  // Rank r runs on CPU pin_cpus[r] alone (sched_setaffinity before its Group is made); empty:
  // wherever the parent may run.
  std::vector<int> pin_cpus;
  std::uint32_t spin_us = GroupConfig{}.spin_us;
  int machine_ranks = 0;  // GroupConfig::machine_ranks
  int kill_rank = -1;            // SIGKILL this rank...
  int kill_after_ms = 0;         // ...this long after start
  double overall_deadline_s = 60;  // then every rank still running is killed (a hang)
};

// body(group, report) runs in each child; report(text) records a message for the parent.
using RankBody = std::function<int(Group& group, const std::function<void(const std::string&)>& report)>;

std::vector<RankOutcome> run_ranks(int size, const HarnessOptions& options, const RankBody& body);

// Names of synk segments now in /dev/shm.
std::vector<std::string> synk_segments();

// A fixture (over ::testing::Test, or TestWithParam<P>) whose tests, passing or failing, leave
// no synk segment behind.
template <class Base = ::testing::Test>
class NoSegmentLeft : public Base {
 protected:
  void SetUp() override { before_ = synk_segments(); }
  void TearDown() override { EXPECT_EQ(synk_segments(), before_); }
  std::vector<std::string> before_;
};

// A Group's collectives with the arguments of Communicator's untyped calls, in that order: each
// makes the call's detail::CollArgs.
void all_reduce(Group& g, const void* send, void* recv, std::size_t count, DataType t, ReduceOp op);
void reduce(Group& g, const void* send, void* recv, std::size_t count, DataType t, ReduceOp op,
            int root);
void broadcast(Group& g, void* buf, std::size_t count, DataType t, int root);
void all_gather(Group& g, const void* send, void* recv, std::size_t count, DataType t);
void gather(Group& g, const void* send, void* recv, std::size_t count, DataType t, int root);
void gatherv(Group& g, const void* send, std::size_t count, void* recv,
             std::span<const std::size_t> recv_counts, DataType t, int root);
void scatter(Group& g, const void* send, void* recv, std::size_t count, DataType t, int root);
void reduce_scatter(Group& g, const void* send, void* recv, std::size_t count, DataType t,
                    ReduceOp op);

}  // namespace synk::shm::testing
