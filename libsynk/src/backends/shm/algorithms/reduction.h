// What the reducing algorithms share: reducing n sources in rank order, and slices.
#pragma once

#include <cstddef>
#include <vector>

#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/reduce_kernels.h"

namespace synk::shm::algo {

// Reduces `count` elements of n sources, source(q) for rank q, into dst (in rank order, so
// every rank that reduces the same data gets the same bits).
template <class Source>
void reduce_from(void* dst, int n, Source&& source, std::size_t count, DataType t, ReduceOp op) {
  const void* fixed[256];
  std::vector<const void*> many;
  const void** s = fixed;
  if (n > 256) {
    many.resize(static_cast<std::size_t>(n));
    s = many.data();
  }
  for (int q = 0; q < n; ++q) s[q] = source(q);
  reduce_into(dst, s, n, count, t, op, n);
}

// [lo, hi) of `count` elements that `peer` of n ranks reduces, split on 64-byte boundaries.
void slice(int peer, int n, std::size_t count, std::size_t es, std::size_t* lo, std::size_t* hi);

// Reduces elements [lo, hi) found at src_offset (in elements) of every rank's slot, or of its
// node buffer where it offered one, into dst; when `own` is given, this rank's elements come
// from own + lo instead of its slot.
void reduce_slice(Parts& p, std::size_t lo, std::size_t hi, std::size_t src_offset, void* dst,
                  DataType t, ReduceOp op, const void* own = nullptr);

// Reduces elements [lo, hi) of every rank's send buffer into dst (dst + 0 is element lo): this
// rank's from own, each peer's pulled by cross-memory attach (after p.cma.open(send)) into a
// scratch buffer a piece at a time.
void reduce_pulled(Parts& p, const void* own, std::size_t lo, std::size_t hi, void* dst,
                   DataType t, ReduceOp op);

}  // namespace synk::shm::algo
