// The one place where a collective's arguments are checked. Backends trust what passes.
#pragma once

#include <cstddef>
#include <optional>

#include "core/backend.h"

namespace synk::detail {

// count * factor elements of type t in bytes, or nullopt where that does not fit in memory
// (it wraps, or passes PTRDIFF_MAX).
std::optional<std::size_t> bytes_in_memory(std::size_t count, std::size_t factor, DataType t);

// Throws synk::Error (InvalidArgument or InvalidUsage) naming the operation, the argument and
// its value. Checks only what this rank can see; SYNK_CHECK_CALLS compares ranks (call_check.h).
void validate(const CollArgs& a, const CommContext& ctx);

// Bytes of the send and recv buffers this rank uses for the call (0 where unused).
struct BufferExtent {
  std::size_t send_bytes = 0;
  std::size_t recv_bytes = 0;
};
BufferExtent buffer_extent(const CollArgs& a, const CommContext& ctx);

}  // namespace synk::detail
