// KeyValue's stall inspector: which keys some ranks have pushed and others have not, and the
// words for it. Every rank contributes one status byte per key; all of them see every rank's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace synk::detail {

// One rank's view of one key.
enum KeyStatus : std::uint8_t {
  kNotPushed = 0,
  kPushed = 1,       // pushed, waiting for less than SYNK_STALL_WARN
  kStalled = 2,      // waiting for longer than SYNK_STALL_WARN
  kTimedOut = 3,     // waiting for longer than SYNK_TIMEOUT
};

struct StalledKey {
  int key = 0;
  std::size_t column = 0;    // its column in the status rows: the key's slot
  std::vector<int> pushed;   // the ranks that pushed it
  std::vector<int> missing;  // the ranks that have not
  KeyStatus worst = kPushed;  // the longest wait among the ranks that pushed it
  int reporter = -1;          // the lowest rank whose wait is kStalled or worse: it warns
};

// status holds ranks rows of keys.size() bytes (rank r's at r * keys.size()); keys[i] is the
// key of column i. The keys that some ranks pushed and others did not, with some rank's wait
// at least `at_least` (kStalled: longer than SYNK_STALL_WARN; kPushed: any).
std::vector<StalledKey> find_stalled(std::span<const std::uint8_t> status, int ranks,
                                     std::span<const int> keys, KeyStatus at_least = kStalled);

// A rank that joined (joined[r]) pushes the identity of every key that another rank pushed
// (one that has not joined, or one that pushed it just before it joined): its status of those
// keys becomes kPushed, so that it is neither named as one missing them nor taken for a rank
// that closed without them. status as for find_stalled.
void count_joined_as_pushed(std::vector<std::uint8_t>& status, const std::vector<bool>& joined,
                            std::size_t keys);

// "ranks 0, 2" / "rank 1"; after 8 ranks, "and N more".
std::string rank_list(const std::vector<int>& ranks);

// The warning line and the error text for a stalled key.
std::string stall_warning(const StalledKey& k, double stall_warn_s, double timeout_s);
std::string stall_error(const StalledKey& k, double timeout_s);
// Every rank has closed the KeyValue, and this key was pushed by some of them only.
std::string closed_error(const StalledKey& k);
// Some ranks have closed the KeyValue (closed[r]) without pushing this key, which others have
// pushed: it can never be reduced. "" where every rank missing it is still open.
std::string closed_unpushed_error(const StalledKey& k, const std::vector<bool>& closed);

}  // namespace synk::detail
