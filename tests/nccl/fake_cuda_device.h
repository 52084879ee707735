// What fake_cuda_device.cc (the LD_PRELOAD CUDA runtime of the tests) reports to the tests and to
// fake_nccl.cc. Test-only; a test finds these with dlsym, so it runs without the fake too.
#pragma once

#include <cstddef>

extern "C" {

struct SynkFakeCudaStats {
  long device_allocs = 0, device_frees = 0;  // cudaMalloc, cudaFree
  long pinned_allocs = 0, pinned_frees = 0;  // cudaHostAlloc, cudaFreeHost
  long h2d_async_from_pinned = 0;    // cudaMemcpyAsync host-to-device from cudaHostAlloc memory
  long h2d_async_from_pageable = 0;  // ... from any other host memory
  long peer_copies = 0;              // cudaMemcpyPeer(Async)
  long context_calls = 0;    // calls that make (or need) a CUDA context on a real device
  long pointer_queries = 0;  // cuPointerGetAttribute (the driver's; no context needed)
};

SynkFakeCudaStats synk_fake_cuda_stats();
// Runs the work queued on the stream (null: on every stream), as a device would before the next
// operation on it; fake_nccl.cc calls it before a collective.
void synk_fake_cuda_flush(struct CUstream_st* stream);
// 1 when [p, p + bytes) is fake device memory (cudaMalloc).
int synk_fake_cuda_is_device(const void* p, std::size_t bytes);
// From now on the stream's work never runs, as behind a kernel that waits for a peer that never
// comes: its queries and events stay not ready (a synchronize on it returns, and runs nothing).
void synk_fake_cuda_stall(struct CUstream_st* stream);
}
