// See kv_plan.h.
#include "kv/kv_plan.h"

#include <algorithm>
#include <tuple>

namespace synk::detail {

namespace {

// What a key must share with a bucket to fuse into it.
template <class KeyOrBucket>
std::tuple<int, int, int> kind_of(const KeyOrBucket& k) {
  return {static_cast<int>(k.dtype), static_cast<int>(k.op), k.owner};
}

}  // namespace

std::vector<Bucket> plan_buckets(std::vector<ReadyKey> ready, std::size_t fusion_bytes) {
  // Within one priority the order is free: keys of one kind stand together, so they fuse.
  std::sort(ready.begin(), ready.end(), [](const ReadyKey& a, const ReadyKey& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (kind_of(a) != kind_of(b)) return kind_of(a) < kind_of(b);
    return a.slot < b.slot;
  });
  std::vector<Bucket> buckets;
  bool last_open = false;  // the last bucket takes more keys of its kind
  for (const ReadyKey& k : ready) {
    const bool alone = fusion_bytes == 0 || k.bytes > fusion_bytes || k.split;
    if (!alone && last_open) {
      Bucket& b = buckets.back();
      if (kind_of(b) == kind_of(k) && b.bytes + k.bytes <= fusion_bytes) {
        b.slots.push_back(k.slot);
        b.bytes += k.bytes;
        continue;
      }
    }
    Bucket b;
    b.slots.push_back(k.slot);
    b.bytes = k.bytes;
    b.fused = !alone;
    b.dtype = k.dtype;
    b.op = k.op;
    b.owner = k.owner;
    buckets.push_back(std::move(b));
    last_open = !alone;
  }
  return buckets;
}

}  // namespace synk::detail
