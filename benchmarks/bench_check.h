// The #wrong check of synk-bench: input patterns of small integers whose results are exact in
// every dtype, and an element-by-element comparison of a result with its closed form.
#pragma once

#include <cstdint>

#include "bench_colls.h"

namespace synk::bench {

// Fills this rank's inputs of the call with the pattern and its outputs with a sentinel
// (all bits set), so an element the collective never wrote counts as wrong.
// The values are pseudo-random functions of (element, rank), small enough to be exact in every
// dtype, so that data in the wrong place, or a rank's input lost or doubled, shows:
//   reductions:    sum and avg 0..3 a rank, min and max 0..15; for prod, 1..3 on one rank per
//                  element and 1 elsewhere, so that products stay below 4 for any number of ranks.
//   data movement: element i of rank r's block is 0..99.
// Each seed gives other values: the timed calls use kTimedSeed and the checked call kCheckSeed,
// so a backend that kept or replayed an earlier call's result fails the check.
inline constexpr std::uint32_t kTimedSeed = 0;
inline constexpr std::uint32_t kCheckSeed = 1;
void fill_buffers(const CallArgs& a, int rank, int nranks, std::uint32_t seed);

// The number of elements of this rank's result that differ from the closed form (0 on ranks
// that receive nothing, e.g. off the root of reduce and gather).
std::uint64_t count_wrong(const CallArgs& a, int rank, int nranks, std::uint32_t seed);

}  // namespace synk::bench
