// Whether a pointer is CUDA device (or managed) memory, asked without creating a CUDA context and
// without linking the driver: only a process that has loaded CUDA's driver library can hold
// device memory, and then the driver's cuPointerGetAttribute answers (looked up in the library
// already loaded, or among the process's symbols, where a test's fake device provides it).
#pragma once

#include "core/backend.h"

namespace synk::detail {

enum class MemoryKind { none, host, device };

// The buffers this rank's part of `a` reads or writes, named as in messages ("send", "recv",
// "buf"): send and recv for all_reduce, all_gather, reduce_scatter and all_to_all(v); send, and
// recv at the root, for reduce, gather and gatherv; the one buffer of broadcast; recv, and send
// at the root, for scatter; none for a barrier.
struct CallBuffer {
  const char* name;
  const void* p;
};
struct CallBuffers {
  CallBuffer at[2];
  int n = 0;
};
CallBuffers call_buffers(const CollArgs& a, int rank);

// The kind of the buffers this rank's part of `a` touches: device for device or managed memory,
// host for any other (heap, stack, pinned host memory, a pointer the driver does not know), none
// for a barrier or null buffers. InvalidArgument when they are of both kinds (say, send on the device and recv in
// host memory): one call cannot take both routes.
MemoryKind call_memory(const CollArgs& a, int rank);

}  // namespace synk::detail
