// The identity element of a reduction: what a rank that takes part without data of its own
// contributes, so that the result is the others' alone (KeyValue::join's shadow pushes).
#pragma once

#include <cstddef>

#include "synk/types.h"

namespace synk::detail {

// Fills count elements of dtype at dst with op's identity: 0 for sum and avg, 1 for prod, the
// dtype's largest value for min and its lowest for max (+inf and -inf for the floating types).
// avg's result still divides by every rank.
void fill_identity(void* dst, std::size_t count, DataType dtype, ReduceOp op);

}  // namespace synk::detail
