// SYNK_CHECK_CALLS=1: before each collective the ranks exchange a short description of the call
// (operation, count, dtype, op, root, and any local validation error), so that mismatched calls
// and an argument error on one rank become a synk::Error on every rank instead of a hang or
// memory corruption. Costs one small all-gather per call; off by default.
#pragma once

#include "core/backend.h"

namespace synk::detail {

// Validates `a` locally and against every other rank's call. Collective over ctx.comm.
void validate_across_ranks(const CollArgs& a, const CommContext& ctx);

}  // namespace synk::detail
