// See algo_chooser.h.
#include "backends/shm/algo_chooser.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "synk/error.h"

namespace synk::shm {

namespace {

std::string_view trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

[[noreturn]] void refuse(std::string_view part, const std::string& why) {
  std::string names;
  for (detail::Collective c : kChosenCollectiveList) {
    names += (names.empty() ? "" : ", ") + std::string(detail::to_string(c));
  }
  throw Error(ErrorCode::InvalidArgument,
              "SYNK_SHM_ALGO: '" + std::string(part) + "': " + why +
                  " (COLL=ALGO, comma-separated; COLL: " + names + "; ALGO: slots, cma)");
}

// The chosen collective named `name`, or -1.
int chosen_index_of(std::string_view name) {
  for (int i = 0; i < kChosenCollectives; ++i) {
    if (name == detail::to_string(kChosenCollectiveList[i])) return i;
  }
  return -1;
}

// Seconds as whole nanoseconds in 32 bits (a call of up to 4.2 s), at least 1: 0 is "not timed".
std::uint64_t packed_ns(double seconds) {
  const double ns = std::ceil(seconds * 1e9);
  return static_cast<std::uint64_t>(std::clamp(ns, 1.0, 4294967295.0));
}

}  // namespace

const char* to_string(ShmAlgo a) { return a == ShmAlgo::cma ? "cma" : "slots"; }

int chosen_index(detail::Collective c) {
  for (int i = 0; i < kChosenCollectives; ++i) {
    if (kChosenCollectiveList[i] == c) return i;
  }
  return -1;
}

ForcedAlgos parse_forced_algos(std::string_view spec) {
  ForcedAlgos forced{};
  while (!trimmed(spec).empty()) {
    const auto comma = spec.find(',');
    const std::string_view part = trimmed(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    const auto eq = part.find('=');
    if (eq == std::string_view::npos) refuse(part, "no '='");
    const std::string_view coll = trimmed(part.substr(0, eq)), algo = trimmed(part.substr(eq + 1));
    const int index = chosen_index_of(coll);
    if (index < 0) refuse(part, "unknown collective '" + std::string(coll) + "'");
    if (algo != "slots" && algo != "cma") refuse(part, "unknown algorithm '" + std::string(algo) + "'");
    auto& slot = forced[static_cast<std::size_t>(index)];
    if (slot) refuse(part, "the collective is named twice");
    slot = algo == "cma" ? ShmAlgo::cma : ShmAlgo::slots;
  }
  return forced;
}

std::string to_string(const ForcedAlgos& forced) {
  std::string text;
  for (int i = 0; i < kChosenCollectives; ++i) {
    const std::optional<ShmAlgo>& algo = forced[static_cast<std::size_t>(i)];
    if (!algo) continue;
    if (!text.empty()) text += ',';
    text.append(detail::to_string(kChosenCollectiveList[i])).append("=").append(to_string(*algo));
  }
  return text;
}

std::uint32_t AlgoChooser::run_calls(std::size_t bytes) {
  const std::size_t n = bytes == 0 ? kMaxRun : kRunBytes / bytes;
  return static_cast<std::uint32_t>(std::clamp<std::size_t>(n, kMinRun, kMaxRun));
}

int AlgoChooser::size_class(std::size_t bytes) {
  const int c = std::bit_width(bytes) - 1;
  return std::clamp(c, 0, kSizeClasses - 1);
}

const AlgoChooser::State& AlgoChooser::state(detail::Collective c, std::size_t bytes) const {
  return states_[static_cast<std::size_t>(chosen_index(c))][static_cast<std::size_t>(size_class(bytes))];
}

ShmAlgo AlgoChooser::choose(detail::Collective c, std::size_t bytes) {
  current_ = nullptr;
  mark_ = Mark::none;
  timed_ = false;
  const auto i = static_cast<std::size_t>(chosen_index(c));
  if (forced_[i]) return *forced_[i];
  if (bytes < kMinBytes) return ShmAlgo::slots;
  State& s = states_[i][static_cast<std::size_t>(size_class(bytes))];
  if (s.trial == 0 && s.since < (s.decided ? s.every : kSettle)) {
    ++s.since;
    return s.chosen;  // the slots before the first trial
  }
  if (s.trial == 0) {  // a trial begins: runs of slots, cma, slots, cma
    s.best[0] = s.best[1] = 0;
    s.run = run_calls(bytes);
  }
  current_ = &s;
  way_ = static_cast<int>(s.trial / s.run % 2);
  const std::uint32_t in_run = s.trial % s.run;
  mark_ = in_run == kWarm - 1 ? Mark::start : in_run == s.run - 1 ? Mark::stop : Mark::none;
  timed_ = in_run >= kWarm;
  ++s.trial;
  return way_ == 1 ? ShmAlgo::cma : ShmAlgo::slots;
}

bool AlgoChooser::record(double seconds) {
  if (current_ == nullptr || mark_ != Mark::stop) return false;
  State& s = *current_;
  const double per_call = seconds / static_cast<double>(s.run - kWarm);
  double& best = s.best[way_];
  if (best == 0 || per_call < best) best = per_call;
  mark_ = Mark::none;
  timed_ = false;
  if (s.trial < 4 * s.run) {
    current_ = nullptr;
    return false;
  }
  return true;  // current_ stays for cost_word() and decide()
}

std::int64_t AlgoChooser::cost_word() const {
  if (current_ == nullptr) return 0;
  return static_cast<std::int64_t>((packed_ns(current_->best[0]) << 32) |
                                   packed_ns(current_->best[1]));
}

void AlgoChooser::decide(std::span<const std::int64_t> words) {
  if (current_ == nullptr) return;
  State& s = *current_;
  std::uint64_t slowest[2] = {0, 0};
  for (const std::int64_t w : words) {
    const auto u = static_cast<std::uint64_t>(w);
    slowest[0] = std::max(slowest[0], u >> 32);
    slowest[1] = std::max(slowest[1], u & 0xffffffffu);
  }
  const ShmAlgo was = s.chosen;
  s.chosen = static_cast<double>(slowest[1]) * kCmaMargin < static_cast<double>(slowest[0])
                 ? ShmAlgo::cma
                 : ShmAlgo::slots;
  s.agreed[0] = static_cast<double>(slowest[0]) * 1e-9;
  s.agreed[1] = static_cast<double>(slowest[1]) * 1e-9;
  s.every = !s.decided || s.chosen != was ? kRetryFirst : std::min(s.every * 2, kRetryMax);
  s.decided = true;
  s.trial = 0;
  s.since = 0;
  current_ = nullptr;
}

}  // namespace synk::shm
