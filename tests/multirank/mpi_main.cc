// main() of every multi-rank test binary: MPI around GoogleTest, full output from rank 0 only,
// failures from every rank (prefixed with it), and one exit code that is nonzero on all ranks.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "mpi_test.h"

namespace synk_test {

namespace {

std::unique_ptr<synk::Communicator>& world_slot() {
  static std::unique_ptr<synk::Communicator> comm;
  return comm;
}

// Frees the world communicator inside RUN_ALL_TESTS, while MPI is still up.
class WorldEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { world_slot().reset(); }
};

// The listener of ranks other than 0: silent on success, so the log stays readable, but every
// failure is printed with its rank, since rank 0's printer cannot see it.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}

  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    // One write per message keeps lines from interleaving with other ranks' output.
    std::string text = "[rank " + std::to_string(rank_) + "] " +
                       (r.file_name() ? r.file_name() : "unknown file") + ":" +
                       std::to_string(r.line_number()) + ": Failure\n" + r.message() + "\n";
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    std::string text = "[rank " + std::to_string(rank_) + "] [  FAILED  ] " +
                       info.test_suite_name() + "." + info.name() + "\n";
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

 private:
  int rank_;
};

}  // namespace

synk::Communicator& world() {
  auto& slot = world_slot();
  if (!slot) slot = std::make_unique<synk::Communicator>(MPI_COMM_WORLD);
  return *slot;
}

}  // namespace synk_test

int main(int argc, char** argv) {
  // The test initializes MPI itself, so synk adopts it and must neither finalize nor free it.
  // As mpi4py does, with threads (synk's calls then run on its progress thread on every
  // backend); SYNK_TEST_MPI_THREAD=single as a plain MPI_Init does (they run at issue on mpi);
  // =synk: synk initializes it (at the level SYNK_MPI_THREADS says) and finalizes it at exit.
  const char* level_text = std::getenv("SYNK_TEST_MPI_THREAD");
  const std::string level = level_text != nullptr ? level_text : "";
  if (level == "single") {
    MPI_Init(&argc, &argv);
  } else if (level == "synk") {
    synk_test::world();
  } else {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  // Every rank must run the same tests in the same order, or their collectives pair up wrongly:
  // a shuffle uses rank 0's seed everywhere (the default seed comes from each rank's clock).
  if (GTEST_FLAG_GET(shuffle)) {
    int seed = GTEST_FLAG_GET(random_seed);
    if (seed == 0) seed = static_cast<int>(MPI_Wtime() * 1000) % 99999 + 1;
    MPI_Bcast(&seed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    GTEST_FLAG_SET(random_seed, seed);
  }

  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new synk_test::RankFailurePrinter(rank));
  }
  ::testing::AddGlobalTestEnvironment(new synk_test::WorldEnvironment);

  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  std::vector<int> per_rank(static_cast<std::size_t>(size));
  MPI_Gather(&failed, 1, MPI_INT, per_rank.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed) {
    std::string ranks;
    for (int r = 0; r < size; ++r) {
      if (per_rank[static_cast<std::size_t>(r)]) ranks += " " + std::to_string(r);
    }
    std::printf("[  FAILED  ] on rank(s)%s of %d (their failures are prefixed [rank N])\n",
                ranks.c_str(), size);
    std::fflush(stdout);
  }
  if (level != "synk") MPI_Finalize();
  return any_failed;
}
