// See kv_stall.h.
#include "kv/kv_stall.h"

#include <algorithm>

#include "core/backoff.h"

namespace synk::detail {

std::vector<StalledKey> find_stalled(std::span<const std::uint8_t> status, int ranks,
                                     std::span<const int> keys, KeyStatus at_least) {
  std::vector<StalledKey> out;
  const std::size_t n = keys.size();
  for (std::size_t i = 0; i < n; ++i) {
    StalledKey k;
    k.key = keys[i];
    k.column = i;
    for (int r = 0; r < ranks; ++r) {
      const auto s = static_cast<KeyStatus>(status[static_cast<std::size_t>(r) * n + i]);
      (s == kNotPushed ? k.missing : k.pushed).push_back(r);
      if (s >= kStalled && k.reporter < 0) k.reporter = r;
      k.worst = std::max(k.worst, s);
    }
    if (!k.pushed.empty() && !k.missing.empty() && k.worst >= at_least) out.push_back(k);
  }
  return out;
}

void count_joined_as_pushed(std::vector<std::uint8_t>& status, const std::vector<bool>& joined,
                            std::size_t keys) {
  const std::size_t ranks = joined.size();
  for (std::size_t i = 0; i < keys; ++i) {
    bool pushed = false;
    for (std::size_t r = 0; r < ranks && !pushed; ++r) pushed = status[r * keys + i] != kNotPushed;
    if (!pushed) continue;
    for (std::size_t r = 0; r < ranks; ++r) {
      if (joined[r] && status[r * keys + i] == kNotPushed) status[r * keys + i] = kPushed;
    }
  }
}

std::string rank_list(const std::vector<int>& ranks) {
  constexpr std::size_t kShown = 8;
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < kShown; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(ranks[i]);
  }
  if (ranks.size() > kShown) s += " and " + std::to_string(ranks.size() - kShown) + " more";
  return s;
}

std::string stall_warning(const StalledKey& k, double stall_warn_s, double timeout_s) {
  return "KeyValue: key " + std::to_string(k.key) + " has waited more than " +
         seconds_text(stall_warn_s) + " (SYNK_STALL_WARN): pushed by " + rank_list(k.pushed) +
         ", not yet by " + rank_list(k.missing) + "; it fails after " + seconds_text(timeout_s) +
         " (SYNK_TIMEOUT)";
}

std::string stall_error(const StalledKey& k, double timeout_s) {
  return "KeyValue: key " + std::to_string(k.key) + " was pushed by " + rank_list(k.pushed) +
         " but not by " + rank_list(k.missing) + " within " + seconds_text(timeout_s) +
         " (SYNK_TIMEOUT)";
}

std::string closed_error(const StalledKey& k) {
  return "KeyValue: closed on every rank while key " + std::to_string(k.key) + " was pushed by " +
         rank_list(k.pushed) + " but never by " + rank_list(k.missing);
}

std::string closed_unpushed_error(const StalledKey& k, const std::vector<bool>& closed) {
  std::vector<int> gone;
  for (int r : k.missing) {
    if (static_cast<std::size_t>(r) < closed.size() && closed[static_cast<std::size_t>(r)]) {
      gone.push_back(r);
    }
  }
  if (gone.empty()) return "";
  return "KeyValue: " + rank_list(gone) + " closed this KeyValue without pushing key " +
         std::to_string(k.key) + ", which " + rank_list(k.pushed) +
         " pushed: it can never be reduced (every rank pushes the same keys before it closes)";
}

}  // namespace synk::detail
