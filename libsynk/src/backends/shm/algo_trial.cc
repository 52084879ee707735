// The measured choice between the slots and cross-memory attach (algo_chooser.h) as a Group
// runs it: asking the chooser at a call's start, timing the calls of a trial, and agreeing on
// the way at its end.
#include <chrono>
#include <cstdint>
#include <vector>

#include "backends/shm/shm_group.h"
#include "core/logging.h"

namespace synk::shm {

bool Group::cma_chosen(detail::Collective c, std::size_t bytes) {
  if (!cma_.may_be_on()) return false;
  const ShmAlgo way = algo_chooser_.choose(c, bytes);  // alike on every rank
  if (way == ShmAlgo::cma && !cma_.known()) cma_.probe();
  if (!cma_.may_be_on()) return false;  // the chooser's trial of this class is left unfinished
  algo_chosen_ = true;
  if (algo_chooser_.timed()) algo_call_start_ = std::chrono::steady_clock::now();
  return way == ShmAlgo::cma;
}

// At the end of a call of a trial: its time counts in its run's, which begins after a sync and
// ends with one (algo_chooser.h says why); every rank takes the same syncs.
void Group::time_algo_trial() {
  using Clock = std::chrono::steady_clock;
  algo_chosen_ = false;
  const auto seconds = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  if (algo_chooser_.timed()) algo_run_s_ += seconds(algo_call_start_);
  const AlgoChooser::Mark mark = algo_chooser_.mark();
  if (mark == AlgoChooser::Mark::none) return;
  const auto sync_start = Clock::now();
  steps_.settle();
  steps_.sync();
  if (mark == AlgoChooser::Mark::start) {
    algo_run_s_ = 0;
  } else if (algo_chooser_.record(algo_run_s_ + seconds(sync_start))) {
    agree_on_algo();
  }
}

// One more step of the call that ends a trial: every rank publishes its best time of each way,
// and every rank decides from all of them, so all decide alike.
void Group::agree_on_algo() {
  const std::int64_t mine = algo_chooser_.cost_word();
  SYNK_LOG_AT(debug, "shm: " << steps_.op_name() << " trial on rank " << cfg_.rank << ": slots "
                             << static_cast<double>(static_cast<std::uint64_t>(mine) >> 32) * 1e-3
                             << " us, cma " << static_cast<double>(mine & 0xffffffff) * 1e-3
                             << " us a call");
  steps_.settle();  // the status words below are rewritten: every peer must be done with them
  steps_.set_status(mine);
  steps_.sync();
  std::vector<std::int64_t> words(static_cast<std::size_t>(cfg_.size));
  for (int q = 0; q < cfg_.size; ++q) words[static_cast<std::size_t>(q)] = steps_.status_of(q);
  algo_chooser_.decide(words);
  if (cfg_.rank == 0) {
    const auto c = static_cast<detail::Collective>(steps_.call().coll);
    const std::size_t bytes = steps_.call().count * size_of(static_cast<DataType>(steps_.call().dtype));
    const AlgoChooser::State& s = algo_chooser_.state(c, bytes);
    SYNK_LOG_AT(info, "shm: " << steps_.op_name() << " of " << (std::size_t{1} << AlgoChooser::size_class(bytes))
                              << "+ bytes per rank: " << to_string(s.chosen) << " (slowest rank: slots "
                              << s.agreed[0] * 1e6 << " us, cma " << s.agreed[1] * 1e6
                              << " us); measured again after " << s.every << " calls");
  }
}

}  // namespace synk::shm
