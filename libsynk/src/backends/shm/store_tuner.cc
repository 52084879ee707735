// See store_tuner.h.
#include "backends/shm/store_tuner.h"

#include <algorithm>
#include <bit>
#include <fstream>
#include <string>

namespace synk::shm {

std::size_t last_level_cache_bytes() {
  // glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) asks cpuid, which in a VM may describe the host
  // (256 MiB here, against the 32 MiB the kernel reports).
  std::size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level"), size_file(dir + "size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size) || size.empty()) break;
    std::size_t bytes = 0;
    try {
      bytes = std::stoull(size);
    } catch (...) {
      continue;
    }
    if (size.back() == 'K') bytes <<= 10;
    if (size.back() == 'M') bytes <<= 20;
    if (level > best_level || (level == best_level && bytes > best)) {
      best_level = level;
      best = bytes;
    }
  }
  return best;
}

StoreTuner::StoreTuner(StoreMode mode, std::size_t out_bytes_min) : mode_(mode) {
  if (out_bytes_min == 0) {
    const std::size_t llc = last_level_cache_bytes();
    out_bytes_min = llc ? llc / 2 : std::size_t{16} << 20;
  }
  out_bytes_min_ = out_bytes_min;
}

int StoreTuner::size_class(std::size_t bytes) {
  const int c = std::bit_width(bytes) - 1;
  return c < kSizeClasses ? c : kSizeClasses - 1;
}

const StoreTuner::Arms& StoreTuner::arms(int collective, std::size_t bytes) const {
  return arms_[collective % kCollectives][size_class(bytes)];
}

// Calls of neighbouring sizes meet the same machine, and the way each is faster changes at
// the same moments (when the host moves the ranks between caches), so a class need not spend
// its first two runs timing both ways afresh when a neighbour has: one of those runs is the
// slower way, and its reader pays for it in the calls after
// (docs/measurements.md#the-store-tuners-seeds-tries-and-runs).
void StoreTuner::seed(Arms* row, int size_class) {
  for (int d = 1; d < kSizeClasses; ++d) {
    for (int c : {size_class - d, size_class + d}) {
      if (c < 0 || c >= kSizeClasses) continue;
      const Arms& n = row[c];
      if (n.cost[0] <= 0 || n.cost[1] <= 0) continue;
      Arms& a = row[size_class];
      a.cost[0] = n.cost[0];
      a.cost[1] = n.cost[1];
      a.seeded = true;
      return;
    }
  }
}

bool StoreTuner::choose(int collective, std::size_t bytes) {
  current_ = nullptr;
  if (mode_ != StoreMode::tuned) return mode_ == StoreMode::streaming;
  if (!tuned(bytes)) return false;  // stays in the caches: ordinary stores
  Arms* row = arms_[collective % kCollectives];
  const int c = size_class(bytes);
  Arms& a = row[c];
  if (a.calls == 0) seed(row, c);
  const std::uint32_t i = a.calls++;
  const std::uint32_t run = i / kRun, in_run = i % kRun;
  if (in_run == 0) {
    if (run < 2 && !a.seeded) {
      a.run_arm = static_cast<int>(run);  // a run each way before choosing
    } else {
      const int faster = a.cost[1] > 0 && a.cost[1] * kStreamMargin < a.cost[0] ? 1 : 0;
      if (run > 2 && faster != a.favoured) {
        a.every = kExploreEvery;  // the machine changed: watch it closely again
      } else if (a.exploring && a.every < kExploreMaxEvery) {
        a.every *= 2;  // the try confirmed the favoured way: each try costs, so try less often
      }
      a.favoured = faster;
      // The machine may have changed since the way not in favour was timed: now and then a
      // run tries it again. While that keeps confirming the favoured way, less and less often,
      // but at least every kExploreSeconds (docs/measurements.md#the-store-tuners-seeds-tries-and-runs).
      const std::uint32_t since = run - a.last_try;
      a.exploring =
          since >= a.every || (since >= kExploreEvery && a.since_try_s >= kExploreSeconds);
      if (a.exploring) {
        a.last_try = run;
        a.since_try_s = 0;
      }
      a.run_arm = a.exploring ? 1 - a.favoured : a.favoured;
    }
  }
  if (in_run == 0) a.run_best = 0;
  arm_ = a.run_arm;
  timed_ = in_run >= kWarm;
  run_ends_ = in_run == kRun - 1;
  current_ = &a;
  bytes_ = bytes;
  return arm_ == 1;
}

void StoreTuner::record(double seconds) {
  if (!current_) return;
  if (timed_) {
    Arms& a = *current_;
    const double x = seconds / static_cast<double>(bytes_);
    a.run_best = a.run_best == 0 ? x : std::min(a.run_best, x);
    // Only the last kRun - kWarm calls of a run are timed: scaled to the whole run.
    a.since_try_s += seconds * kRun / (kRun - kWarm);
    if (run_ends_) {
      // A run counts by its fastest timed call: now and then one call takes 10-100 times as
      // long as its neighbours (the host takes the CPU away, or a page is faulted in), and
      // counted into the mean it made the faster way look slower
      // (docs/measurements.md#the-store-tuners-seeds-tries-and-runs). A way tried
      // again after a while starts afresh (its old time is from another machine state); the
      // way in use keeps a running mean of its last few runs. (A run whose last call throws
      // is not counted; the communicator is most likely broken by then anyway.)
      double& c = a.cost[arm_];
      c = a.exploring || c == 0 ? a.run_best : (c + a.run_best) / 2;
    }
  }
  current_ = nullptr;
}

}  // namespace synk::shm
