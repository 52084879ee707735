// The shm backend's measured choice between the slots and cross-memory attach (algo_chooser.h),
// driven with made-up call times and every rank's cost words, SYNK_SHM_ALGO's parser, and the
// selection table SYNK_LOG=info prints (selection_table.h).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/shm/algo_chooser.h"
#include "backends/shm/selection_table.h"
#include "synk/error.h"

namespace synk::shm {
namespace {

using detail::Collective;
constexpr std::size_t kBig = AlgoChooser::kMinBytes;

// Packs seconds of each way as cost_word() does.
std::int64_t word(double slots_s, double cma_s) {
  const auto ns = [](double s) { return static_cast<std::uint64_t>(s * 1e9); };
  return static_cast<std::int64_t>((ns(slots_s) << 32) | ns(cma_s));
}

// The first calls of a class, through the slots and not timed, while the store tuner settles.
void settle(AlgoChooser& a, Collective c = Collective::broadcast, std::size_t bytes = kBig) {
  for (std::uint32_t i = 0; i < AlgoChooser::kSettle; ++i) {
    EXPECT_EQ(a.choose(c, bytes), ShmAlgo::slots) << "call " << i;
    EXPECT_EQ(a.mark(), AlgoChooser::Mark::none);
    EXPECT_FALSE(a.timed());
  }
}

// One trial of `c` on this rank: its calls take slots_s or cma_s each (a run is timed over its
// calls after the warm ones); the other ranks' words are `others`. Returns the trial's ways.
std::vector<ShmAlgo> trial(AlgoChooser& a, double slots_s, double cma_s,
                           const std::vector<std::int64_t>& others,
                           Collective c = Collective::broadcast, std::size_t bytes = kBig) {
  const std::uint32_t run = AlgoChooser::run_calls(bytes);
  const double timed = run - AlgoChooser::kWarm;
  if (!a.state(c, bytes).decided) settle(a, c, bytes);
  std::vector<ShmAlgo> ways;
  for (std::uint32_t i = 0; i < 4 * run; ++i) {
    const ShmAlgo w = a.choose(c, bytes);
    ways.push_back(w);
    if (a.mark() != AlgoChooser::Mark::stop) continue;
    const bool ends = a.record(timed * (w == ShmAlgo::cma ? cma_s : slots_s));
    EXPECT_EQ(ends, i + 1 == 4 * run) << "call " << i;
    if (ends) {
      std::vector<std::int64_t> words = others;
      words.insert(words.begin(), a.cost_word());
      a.decide(words);
    }
  }
  return ways;
}

TEST(AlgoChooser, ATrialRunsEachWayThenEveryRankDecidesAlike) {
  AlgoChooser a;
  const std::vector<ShmAlgo> ways = trial(a, 2e-3, 1e-3, {word(2e-3, 1e-3)});
  const std::uint32_t run = AlgoChooser::run_calls(kBig);
  ASSERT_EQ(ways.size(), 4 * run);
  for (std::uint32_t i = 0; i < 4 * run; ++i) {
    EXPECT_EQ(ways[i], i / run % 2 == 0 ? ShmAlgo::slots : ShmAlgo::cma) << "call " << i;
  }
  const AlgoChooser::State& s = a.state(Collective::broadcast, kBig);
  EXPECT_TRUE(s.decided);
  EXPECT_EQ(s.chosen, ShmAlgo::cma);
  EXPECT_NEAR(s.agreed[0], 2e-3, 1e-9);
  // Until the next trial, every call takes the choice and is not timed.
  for (std::uint32_t i = 0; i < AlgoChooser::kRetryFirst; ++i) {
    EXPECT_EQ(a.choose(Collective::broadcast, kBig), ShmAlgo::cma);
    EXPECT_EQ(a.mark(), AlgoChooser::Mark::none);
    EXPECT_FALSE(a.record(1.0));
  }
  // Then both ways again, and an unchanged choice waits twice as long before the next.
  trial(a, 2e-3, 1e-3, {word(2e-3, 1e-3)});
  EXPECT_EQ(a.state(Collective::broadcast, kBig).every, 2 * AlgoChooser::kRetryFirst);
}

TEST(AlgoChooser, TheSlowestRankDecidesWithAMarginForTheSlots) {
  AlgoChooser a;
  // Faster here, but another rank's single copies are slower than its slot calls.
  trial(a, 2e-3, 1e-3, {word(2e-3, 3e-3)});
  EXPECT_EQ(a.state(Collective::broadcast, kBig).chosen, ShmAlgo::slots);
  // Classes and collectives are apart; a tie within kCmaMargin keeps the slots.
  trial(a, 1e-3, 0.98e-3, {word(1e-3, 0.98e-3)}, Collective::all_gather, 4 * kBig);
  EXPECT_EQ(a.state(Collective::all_gather, 4 * kBig).chosen, ShmAlgo::slots);
  trial(a, 1e-3, 0.5e-3, {word(1e-3, 0.5e-3)}, Collective::gather, 4 * kBig);
  EXPECT_EQ(a.state(Collective::gather, 4 * kBig).chosen, ShmAlgo::cma);
  EXPECT_FALSE(a.state(Collective::gather, kBig).decided);
}

TEST(AlgoChooser, ARunIsTimedFromItsWarmCallsToItsLast) {
  // Runs move about kRunBytes per rank, within their bounds.
  EXPECT_EQ(AlgoChooser::run_calls(kBig), AlgoChooser::kMaxRun);
  EXPECT_EQ(AlgoChooser::run_calls(AlgoChooser::kRunBytes / 8), 8u);
  EXPECT_EQ(AlgoChooser::run_calls(AlgoChooser::kRunBytes / 12), 12u);
  EXPECT_EQ(AlgoChooser::run_calls(std::size_t{1} << 30), AlgoChooser::kMinRun);
  constexpr std::size_t kBytes = AlgoChooser::kRunBytes / 8;
  AlgoChooser a;
  settle(a, Collective::broadcast, kBytes);
  std::vector<AlgoChooser::Mark> marks;
  const std::uint32_t run = AlgoChooser::run_calls(kBytes);
  for (std::uint32_t i = 0; i < 4 * run; ++i) {
    const ShmAlgo w = a.choose(Collective::broadcast, kBytes);
    marks.push_back(a.mark());
    // The run's time over its timed calls: 1 ms a call through the slots, 0.5 ms by cma; the
    // second run of each way is slower, and the best counts.
    const double per_call = (w == ShmAlgo::cma ? 0.5e-3 : 1e-3) * (i < 2 * run ? 1.0 : 3.0);
    if (a.mark() == AlgoChooser::Mark::stop &&
        a.record((run - AlgoChooser::kWarm) * per_call)) {
      a.decide(std::vector<std::int64_t>{a.cost_word()});
    }
  }
  for (std::uint32_t i = 0; i < 4 * run; ++i) {
    const std::uint32_t in_run = i % run;
    const AlgoChooser::Mark want = in_run == AlgoChooser::kWarm - 1 ? AlgoChooser::Mark::start
                                   : in_run == run - 1 ? AlgoChooser::Mark::stop
                                                       : AlgoChooser::Mark::none;
    EXPECT_EQ(marks[i], want) << "call " << i;
  }
  const AlgoChooser::State& s = a.state(Collective::broadcast, kBytes);
  EXPECT_EQ(s.chosen, ShmAlgo::cma);
  EXPECT_NEAR(s.agreed[0], 1e-3, 1e-9);  // seconds per call of the best run
  EXPECT_NEAR(s.agreed[1], 0.5e-3, 1e-9);
}

TEST(AlgoChooser, SmallCallsAndForcedWaysAreNotMeasured) {
  ForcedAlgos forced{};
  forced[static_cast<std::size_t>(chosen_index(Collective::gather))] = ShmAlgo::cma;
  AlgoChooser a(forced);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(a.choose(Collective::broadcast, kBig - 1), ShmAlgo::slots);
    EXPECT_FALSE(a.record(1.0));
    EXPECT_EQ(a.choose(Collective::gather, 1), ShmAlgo::cma);
    EXPECT_EQ(a.mark(), AlgoChooser::Mark::none);
    EXPECT_FALSE(a.record(1.0));
  }
  EXPECT_FALSE(a.state(Collective::gather, kBig).decided);
}

TEST(AlgoChooser, ForcedWaysParse) {
  const ForcedAlgos f = parse_forced_algos(" all_gather = cma, broadcast=slots ");
  EXPECT_EQ(f[static_cast<std::size_t>(chosen_index(Collective::all_gather))], ShmAlgo::cma);
  EXPECT_EQ(f[static_cast<std::size_t>(chosen_index(Collective::broadcast))], ShmAlgo::slots);
  EXPECT_FALSE(f[static_cast<std::size_t>(chosen_index(Collective::gather))].has_value());
  EXPECT_FALSE(parse_forced_algos("")[0].has_value());
  // One text however the spec ordered and spaced the ways: what the ranks compare.
  EXPECT_EQ(to_string(f), "broadcast=slots,all_gather=cma");
  EXPECT_EQ(to_string(parse_forced_algos("")), "");
  EXPECT_EQ(parse_forced_algos("all_reduce=cma,reduce=slots")[static_cast<std::size_t>(
                chosen_index(Collective::all_reduce))],
            ShmAlgo::cma);
  EXPECT_EQ(chosen_index(Collective::reduce_scatter), -1);
  for (const char* bad : {"reduce_scatter=cma", "broadcast=ring", "broadcast", "gather=cma,gather=slots"}) {
    try {
      parse_forced_algos(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      const std::string what = e.what();
      EXPECT_NE(what.find("SYNK_SHM_ALGO"), std::string::npos) << what;
      EXPECT_NE(what.find("broadcast, all_gather, gather, all_reduce, reduce"), std::string::npos)
          << what;
      EXPECT_NE(what.find("slots, cma"), std::string::npos) << what;
    }
  }
}

// The table with each run of spaces as one.
std::string squeezed(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c != ' ' || out.empty() || out.back() != ' ') out += c;
  }
  return out;
}

TEST(AlgoChooser, TheSelectionTableShowsEveryDecidedClassAndEveryForcedCollective) {
  const StoreTuner stores;
  AlgoChooser none;
  EXPECT_EQ(selection_table(none, stores, 2), "");
  AlgoChooser a;
  trial(a, 2e-3, 1e-3, {word(3e-3, 1.5e-3)}, Collective::all_reduce, 4 * kBig);
  trial(a, 1e-3, 4e-3, {word(1e-3, 4e-3)}, Collective::broadcast, kBig);
  const std::string table = squeezed(selection_table(a, stores, 2));
  EXPECT_NE(table.find("collective"), std::string::npos) << table;
  // The slowest rank's times, in microseconds.
  EXPECT_NE(table.find("all_reduce 2 256 KiB+ cma measured 3000.0 1500.0"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("broadcast 2 64 KiB+ slots measured 1000.0 4000.0"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("gather "), std::string::npos) << table;

  ForcedAlgos f{};
  f[static_cast<std::size_t>(chosen_index(Collective::reduce))] = ShmAlgo::cma;
  const std::string forced = squeezed(selection_table(AlgoChooser(f), stores, 4));
  EXPECT_NE(forced.find("reduce 4 all cma forced"), std::string::npos)
      << forced;
}

}  // namespace
}  // namespace synk::shm
