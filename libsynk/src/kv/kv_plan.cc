// See kv_plan.h.
#include "kv/kv_plan.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace synk::detail {

std::vector<Bucket> plan_buckets(std::vector<ReadyKey> ready, std::size_t fusion_bytes) {
  std::sort(ready.begin(), ready.end(), [](const ReadyKey& a, const ReadyKey& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.slot < b.slot;
  });
  std::vector<Bucket> buckets;
  // The open bucket of each kind, as an index into buckets.
  std::map<std::tuple<int, int, int>, std::size_t> open;
  for (const ReadyKey& k : ready) {
    const bool alone = fusion_bytes == 0 || k.bytes > fusion_bytes;
    const auto kind = std::make_tuple(static_cast<int>(k.dtype), static_cast<int>(k.op), k.owner);
    auto it = open.find(kind);
    if (!alone && it != open.end() && buckets[it->second].bytes + k.bytes <= fusion_bytes) {
      Bucket& b = buckets[it->second];
      b.slots.push_back(k.slot);
      b.bytes += k.bytes;
      continue;
    }
    Bucket b;
    b.slots.push_back(k.slot);
    b.bytes = k.bytes;
    b.fused = !alone;
    b.dtype = k.dtype;
    b.op = k.op;
    b.owner = k.owner;
    buckets.push_back(std::move(b));
    if (!alone) open[kind] = buckets.size() - 1;
  }
  return buckets;
}

}  // namespace synk::detail
