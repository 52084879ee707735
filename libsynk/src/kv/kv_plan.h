// Which collectives a KeyValue cycle runs for the keys every rank has pushed: highest priority
// first, small keys of one kind fused into buckets of at most the fusion size. A pure function
// of what every rank agreed on, so every rank plans the same buckets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "synk/types.h"

namespace synk::detail {

// A key that every rank has pushed.
struct ReadyKey {
  std::size_t slot = 0;       // the key's place in the order of init_key
  std::int64_t priority = 0;  // the highest over the ranks of push + pull priority
  std::size_t bytes = 0;
  DataType dtype = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int owner = -1;  // with an Updater: the rank that updates it
  bool split = false;  // reduced in parts (larger than the partition size): never fused
};

// One collective: the keys (slots), in this order, packed one after another into the fusion
// buffer (fused), or a lone key reduced where it is (not fused).
struct Bucket {
  std::vector<std::size_t> slots;
  std::size_t bytes = 0;
  bool fused = false;
  DataType dtype = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int owner = -1;
};

// The buckets in the order to run them: keys by priority, each joining the bucket before it
// where that is of its kind (dtype, op, owner) and it still fits in fusion_bytes; a key larger
// than that, a split key (larger than the fusion size KeyValue uses anyway: a safeguard), or every
// key when fusion_bytes is 0, runs alone. So no bucket runs before one holding a key of higher
// priority (a bucket ends where a key of another kind comes between);
// keys of one priority are ordered by kind, then slot, so that those of a kind fuse.
std::vector<Bucket> plan_buckets(std::vector<ReadyKey> ready, std::size_t fusion_bytes);

}  // namespace synk::detail
