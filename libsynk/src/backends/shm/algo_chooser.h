// Which algorithm a large broadcast, all_gather, gather, all_reduce or reduce of the shm backend
// runs: through the shared slots (two copies: in, then out) or by cross-memory attach (one copy,
// each reader pulling straight out of the writer's buffer, as Open MPI's vader does). Which is
// faster depends on the host: where the ranks share a large last-level cache the single copy
// wins; where they do not (this project's AMD VM on two L3s) the kernel's copy, which pins the
// other process's pages 4 KiB at a time, loses to two memcpys. So the choice is measured on the
// host, per collective and size class (a power of two of the bytes per rank): after kSettle calls
// through the slots (the first ones are slow on some hosts while the store tuner settles and the
// walk meets new parts of the slots), a trial runs each way for a run of calls, twice in turn
// (slots, cma, slots, cma), and at the end of the trial the ranks agree in one more step of that
// call on the way whose slowest rank had the faster best run. A class tries both ways again after
// kRetryFirst calls, then after twice as many each time, up to kRetryMax, since a host's state
// can change (a VM's vCPUs moved between caches).
//
// A run's time is that of its calls after the first kWarm (each from its start to its end, so
// that the caller's work and other calls between them do not count) and of a sync after its
// last, with a sync before the first: the slot path lets a writer run up to two steps ahead of
// its readers, so calls timed alone on their rank showed the lag of the calls before them and
// hid their own. How the trial came to be as it is, with figures:
// docs/measurements.md#single-copy-or-slots-measured-2026-11-27.
//
// Every rank makes the same calls, so every rank runs the same trial schedule; the decision
// comes from every rank's costs, so every rank reaches the same one. SYNK_SHM_ALGO forces a way
// per collective (no trial).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/backend.h"

namespace synk::shm {

enum class ShmAlgo : std::uint8_t { slots, cma };

const char* to_string(ShmAlgo a);

// The collectives whose algorithm is chosen, in the order of ForcedAlgos and the chooser's
// tables; SYNK_SHM_ALGO names them as detail::to_string does.
inline constexpr detail::Collective kChosenCollectiveList[] = {
    detail::Collective::broadcast, detail::Collective::all_gather, detail::Collective::gather,
    detail::Collective::all_reduce, detail::Collective::reduce};
inline constexpr int kChosenCollectives = static_cast<int>(std::size(kChosenCollectiveList));
int chosen_index(detail::Collective c);  // -1 for the others

// SYNK_SHM_ALGO: "COLL=ALGO[,COLL=ALGO...]", COLL one of the chosen collectives and ALGO
// slots or cma; spaces around the parts are ignored, an empty spec forces nothing. Throws
// synk::Error(InvalidArgument) naming the bad part and the valid names.
using ForcedAlgos = std::array<std::optional<ShmAlgo>, kChosenCollectives>;
ForcedAlgos parse_forced_algos(std::string_view spec);
// The forced ways as parse_forced_algos reads them, in kChosenCollectiveList's order: one text
// for each set of ways, however the spec ordered and spaced them.
std::string to_string(const ForcedAlgos& forced);

class AlgoChooser {
 public:
  static constexpr std::size_t kMinBytes = std::size_t{64} << 10;  // per rank; below: slots
  static constexpr std::uint32_t kSettle = 64;  // calls of a class before its first trial
  // Calls in a row on one way in a trial: as many as move kRunBytes per rank, from kMinRun to
  // kMaxRun. Short runs of small calls favoured the single copy: each run ends with a sync,
  // which the slot path's pipelined calls pay and a single copy's closing sync already has
  // (docs/measurements.md#single-copy-or-slots-measured-2026-11-27).
  static constexpr std::size_t kRunBytes = std::size_t{4} << 20;
  static constexpr std::uint32_t kMinRun = 4;
  static constexpr std::uint32_t kMaxRun = 16;
  static std::uint32_t run_calls(std::size_t bytes);
  static constexpr std::uint32_t kWarm = 1;  // of them not timed (first touches, the other way's lag)
  static constexpr std::uint32_t kRetryFirst = 256;
  static constexpr std::uint32_t kRetryMax = 8192;
  // The single copy must be this much faster: the slots are the path every other call takes.
  static constexpr double kCmaMargin = 1.05;
  static constexpr int kSizeClasses = 48;

  explicit AlgoChooser(ForcedAlgos forced = {}) : forced_(forced) {}

  // At the start of a call of `bytes` per rank of collective c (one of the chosen ones), on
  // every rank alike: its way.
  ShmAlgo choose(detail::Collective c, std::size_t bytes);
  // Whether the call just chosen counts in its run's time.
  bool timed() const { return timed_; }
  // What it does at its end, on every rank alike: nothing; start, a sync that begins its run's
  // timed part; or stop, a sync whose time counts, and then record().
  enum class Mark { none, start, stop };
  Mark mark() const { return mark_; }
  // At a stop: the run's seconds (its timed calls and the stop's sync). True when the call ends
  // a trial: the ranks then exchange cost_word() and each calls decide() with them all.
  bool record(double seconds);
  // This rank's best time of each way in the trial just ended, packed into one status word.
  std::int64_t cost_word() const;
  // Every rank's cost_word(), in rank order: settles the trial's class.
  void decide(std::span<const std::int64_t> words);

  // What the chooser holds for a class (for tests and SYNK_LOG=info).
  struct State {
    ShmAlgo chosen = ShmAlgo::slots;
    bool decided = false;       // a trial has ended
    std::uint32_t trial = 0;    // calls into the trial under way (0: none under way)
    std::uint32_t run = kMinRun;  // calls per run in it
    std::uint32_t since = 0;    // calls since the last trial ended (or, before one, since the first)
    std::uint32_t every = kRetryFirst;
    double best[2] = {0, 0};    // this rank's seconds per call of each way's best run in the trial
    double agreed[2] = {0, 0};  // the slowest rank's, at the last decision
  };
  const State& state(detail::Collective c, std::size_t bytes) const;
  // The way SYNK_SHM_ALGO forces for c, if any.
  std::optional<ShmAlgo> forced(detail::Collective c) const {
    return forced_[static_cast<std::size_t>(chosen_index(c))];
  }
  static int size_class(std::size_t bytes);

 private:
  ForcedAlgos forced_;
  std::array<std::array<State, kSizeClasses>, kChosenCollectives> states_{};
  State* current_ = nullptr;  // the class of the call under way, while in a trial
  int way_ = 0;               // its way (0 slots, 1 cma)
  Mark mark_ = Mark::none;
  bool timed_ = false;
};

}  // namespace synk::shm
