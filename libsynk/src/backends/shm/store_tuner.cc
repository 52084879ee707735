// See store_tuner.h.
#include "backends/shm/store_tuner.h"

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

bool StoreTuner::choose(int collective, std::size_t bytes) {
  current_ = nullptr;
  if (mode_ != StoreMode::tuned) return mode_ == StoreMode::streaming;
  if (!tuned(bytes)) return false;  // stays in the caches: ordinary stores
  Arms& a = arms_[collective % kCollectives][size_class(bytes)];
  const std::uint32_t i = a.calls++;
  const std::uint32_t run = i / kRun, in_run = i % kRun;
  // The machine may have changed since the way not in favour was timed: now and then a run
  // tries it again.
  const bool exploring = run >= 2 && run % kExploreEvery == 0;
  if (in_run == 0) {
    const int favoured = a.cost[1] > 0 && a.cost[1] * kStreamMargin < a.cost[0] ? 1 : 0;
    if (run < 2) {
      a.run_arm = static_cast<int>(run);  // a run each way before choosing
    } else {
      a.run_arm = exploring ? 1 - favoured : favoured;
    }
  }
  arm_ = a.run_arm;
  timed_ = in_run >= kWarm;
  explored_ = exploring && in_run == kWarm;
  current_ = &a;
  bytes_ = bytes;
  return arm_ == 1;
}

void StoreTuner::record(double seconds) {
  if (!current_) return;
  if (timed_) {
    const double x = seconds / static_cast<double>(bytes_);
    double& c = current_->cost[arm_];
    // A way tried again after a while starts afresh (its old time is from another machine
    // state); the way in use keeps a running mean of its last few calls.
    c = explored_ || c == 0 ? x : (c + x) / 2;
  }
  current_ = nullptr;
}

}  // namespace synk::shm
