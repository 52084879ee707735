// See store_tuner.h.
#include "backends/shm/store_tuner.h"

#include <bit>

namespace synk::shm {

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
  if (bytes < kMinBytes) return false;  // stays in the caches: ordinary stores
  Arms& a = arms_[collective % kCollectives][size_class(bytes)];
  const std::uint32_t i = a.calls++;
  const int favoured = a.cost[1] > 0 && a.cost[1] < a.cost[0] ? 1 : 0;
  if (i < 4) {
    arm_ = static_cast<int>(i & 1);  // both ways twice, alternating, before choosing
    explored_ = false;
  } else if (i % kExploreEvery == 0) {
    arm_ = 1 - favoured;  // the machine may have changed since the other way was timed
    explored_ = true;
  } else {
    arm_ = favoured;
    explored_ = false;
  }
  current_ = &a;
  bytes_ = bytes;
  return arm_ == 1;
}

void StoreTuner::record(double seconds) {
  if (!current_) return;
  const double x = seconds / static_cast<double>(bytes_);
  double& c = current_->cost[arm_];
  // A way tried again after a while starts afresh (its old time is from another machine
  // state); the way in use keeps a running mean of its last few calls.
  c = explored_ || c == 0 ? x : (c + x) / 2;
  current_ = nullptr;
}

}  // namespace synk::shm
