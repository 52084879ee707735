// Element-wise reduction of several source buffers into one, for every DataType and ReduceOp.
// float16/bfloat16 accumulate in float and round once; avg multiplies the sum by 1/scale_n.
#pragma once

#include <cstddef>

#include "synk/types.h"

namespace synk::shm {

// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i] for i in [0, count), in that
// order (so every rank that reduces the same data gets the same bits). For avg, the sum is
// multiplied by 1/scale_n in the accumulation type. dst may alias srcs[0], no other source.
void reduce_into(void* dst, const void* const* srcs, int nsrc, std::size_t count, DataType t,
                 ReduceOp op, int scale_n);

}  // namespace synk::shm
