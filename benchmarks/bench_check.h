// The #wrong check of synk-bench: input patterns of small integers whose results are exact in
// every dtype, and an element-by-element comparison of a result with its closed form.
#pragma once

#include <cstdint>

#include "bench_colls.h"

namespace synk::bench {

// Fills this rank's inputs of the call with the pattern and its outputs with a sentinel
// (all bits set), so an element the collective never wrote counts as wrong.
//   reductions:    rank r's element j is 1 + (r + j) % 3; for prod, 1 + j % 3 on rank j % n and
//                  1 elsewhere, so that products stay below 4 for any number of ranks.
//   data movement: element i of rank r's block is (31 r + i) % 100.
void fill_buffers(const CallArgs& a, int rank, int nranks);

// The number of elements of this rank's result that differ from the closed form (0 on ranks
// that receive nothing, e.g. off the root of reduce and gather).
std::uint64_t count_wrong(const CallArgs& a, int rank, int nranks);

}  // namespace synk::bench
