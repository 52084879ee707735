// An LD_PRELOAD stand-in for the CUDA runtime calls synk makes, for machines without a GPU.
// Test-only. Devices: SYNK_FAKE_DEVICE_COUNT of them (default 1), at PCI 0000:00:DD.0 (DD the
// device), so that two ranks of one host share device 0, which the bootstrap must refuse before
// NCCL is involved; with SYNK_FAKE_DISTINCT_BUS=1 the bus is the MPI rank (0000:RR:DD.0): the
// ranks then reach NCCL's init, which fails without a driver (or succeeds under fake_nccl.cc).
//
// "Device memory" is host memory the fake remembers, so the code under test can be checked for
// what a GPU would fault on: copies are checked against their cudaMemcpyKind and devices, and
// NCCL (fake_nccl.cc) checks its buffers. Work queued on a stream runs only when the program
// waits for it (cudaStreamQuery, cudaEventQuery, a synchronize, a blocking copy), the latest a
// real device could run it: a host buffer reused before its copy was waited for shows up as wrong
// data on the device. synk_fake_cuda_stats() counts what the tests check (pinned staging).
#include "fake_cuda_device.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include <unistd.h>

namespace {

struct Alloc {
  std::size_t bytes;
  bool pinned;  // cudaHostAlloc; else cudaMalloc
  int device;
};

struct FakeStream {
  int device = 0;
  std::uint64_t enqueued = 0, executed = 0;
  bool stalled = false;  // synk_fake_cuda_stall: nothing queued runs any more
  std::deque<std::function<void()>> ops;
};

struct FakeEvent {
  FakeStream* stream = nullptr;  // null: recorded on the legacy stream, or never
  std::uint64_t seq = 0;         // complete once stream->executed reaches it
};

std::recursive_mutex mu;  // recursive: a flush runs ops that may take it again
std::map<std::uintptr_t, Alloc> allocs;
std::map<FakeStream*, bool> streams;
int current_device = 0;
SynkFakeCudaStats stats;

int device_count() {
  const char* v = std::getenv("SYNK_FAKE_DEVICE_COUNT");
  return v && *v ? std::atoi(v) : 1;
}

// The allocation [p, p + bytes) lies in, or null.
const Alloc* find(const void* p, std::size_t bytes) {
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  auto it = allocs.upper_bound(a);
  if (it == allocs.begin()) return nullptr;
  --it;
  if (a + bytes > it->first + it->second.bytes || (bytes == 0 && a >= it->first + it->second.bytes))
    return nullptr;
  return &it->second;
}

bool is_device(const void* p, std::size_t bytes, int device = -1) {
  const Alloc* a = find(p, bytes);
  return a && !a->pinned && (device < 0 || a->device == device);
}

void run_until(FakeStream* s, std::uint64_t seq) {
  while (!s->stalled && s->executed < seq && !s->ops.empty()) {
    std::function<void()> op = std::move(s->ops.front());
    s->ops.pop_front();
    op();
    ++s->executed;
  }
}

void flush(FakeStream* s) { run_until(s, s->enqueued); }

void flush_all() {
  for (auto& [s, alive] : streams) flush(s);
}

// Queues op on the stream; the legacy stream (null) waits for every stream and runs it now.
void enqueue(cudaStream_t stream, std::function<void()> op) {
  FakeStream* s = reinterpret_cast<FakeStream*>(stream);
  if (!s) {
    flush_all();
    op();
    return;
  }
  s->ops.push_back(std::move(op));
  ++s->enqueued;
}

// The check a GPU would do by faulting: each side of the copy is where its kind says.
bool valid_copy(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind) {
  if (n == 0) return true;
  switch (kind) {
    case cudaMemcpyHostToDevice:
      return is_device(dst, n) && !is_device(src, n);
    case cudaMemcpyDeviceToHost:
      return is_device(src, n) && !is_device(dst, n);
    case cudaMemcpyDeviceToDevice:
      return is_device(src, n) && is_device(dst, n);
    case cudaMemcpyHostToHost:
      return !is_device(src, n) && !is_device(dst, n);
    default:
      return true;  // cudaMemcpyDefault: any
  }
}

void count_copy(const void* src, std::size_t n, cudaMemcpyKind kind, bool async) {
  if (kind != cudaMemcpyHostToDevice || !async) return;
  const Alloc* a = find(src, n);
  if (a && a->pinned) {
    ++stats.h2d_async_from_pinned;
  } else {
    ++stats.h2d_async_from_pageable;
  }
}

// A call that makes the process's CUDA context on a real device (or needs one): a CPU program
// must make none. SYNK_FAKE_REPORT=FILE: the counts are written to FILE.<pid> at exit.
void count_context_call() { __atomic_add_fetch(&stats.context_calls, 1, __ATOMIC_RELAXED); }

struct Report {
  ~Report() {
    const char* file = std::getenv("SYNK_FAKE_REPORT");
    if (!file || !*file) return;
    const std::string path = std::string(file) + "." + std::to_string(getpid());
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      std::fprintf(f, "context_calls %ld\npointer_queries %ld\n", stats.context_calls,
                   stats.pointer_queries);
      std::fclose(f);
    }
  }
} report_at_exit;

}  // namespace

extern "C" {

// The driver's query, which synk's auto routing asks (core/memory_kind.cc): memory type 2
// (device) for fake device memory, 1 (host) for pinned memory, an error (1, not a pointer the
// driver knows) for any other; never managed.
int cuPointerGetAttribute(void* data, int attribute, unsigned long long ptr) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  ++stats.pointer_queries;
  const Alloc* a = find(reinterpret_cast<const void*>(ptr), 0);
  if (!a) return 1;  // CUDA_ERROR_INVALID_VALUE
  if (attribute == 2) *static_cast<unsigned*>(data) = a->pinned ? 1u : 2u;
  if (attribute == 8) *static_cast<unsigned*>(data) = 0u;
  return 0;
}

SynkFakeCudaStats synk_fake_cuda_stats() {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  return stats;
}

void synk_fake_cuda_flush(cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  if (FakeStream* s = reinterpret_cast<FakeStream*>(stream)) {
    flush(s);
  } else {
    flush_all();
  }
}

void synk_fake_cuda_stall(cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  FakeStream* s = reinterpret_cast<FakeStream*>(stream);
  if (!s) return;
  s->ops.push_back([] {});  // the work that never ends: later events are behind it
  ++s->enqueued;
  s->stalled = true;
}

int synk_fake_cuda_is_device(const void* p, std::size_t bytes) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  return is_device(p, bytes) ? 1 : 0;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  count_context_call();
  if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "synk fake CUDA device %d", device);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  const char* distinct = std::getenv("SYNK_FAKE_DISTINCT_BUS");
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const int bus = distinct && distinct[0] == '1' && rank ? std::atoi(rank) : 0;
  std::snprintf(bus_id, static_cast<std::size_t>(len), "0000:%02x:%02x.0", bus, device);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  count_context_call();
  const std::lock_guard<std::recursive_mutex> lock(mu);
  *p = std::malloc(bytes ? bytes : 1);
  if (!*p) return cudaErrorMemoryAllocation;
  allocs[reinterpret_cast<std::uintptr_t>(*p)] = Alloc{bytes, false, current_device};
  ++stats.device_allocs;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  if (!p) return cudaSuccess;
  const auto it = allocs.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == allocs.end() || it->second.pinned) return cudaErrorInvalidValue;
  flush_all();  // cudaFree waits for the device's work
  allocs.erase(it);
  std::free(p);
  ++stats.device_frees;
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** p, std::size_t bytes, unsigned int flags) {
  count_context_call();
  (void)flags;
  const std::lock_guard<std::recursive_mutex> lock(mu);
  *p = std::malloc(bytes ? bytes : 1);
  if (!*p) return cudaErrorMemoryAllocation;
  allocs[reinterpret_cast<std::uintptr_t>(*p)] = Alloc{bytes, true, current_device};
  ++stats.pinned_allocs;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* p) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  const auto it = allocs.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == allocs.end() || !it->second.pinned) return cudaErrorInvalidValue;
  flush_all();
  allocs.erase(it);
  std::free(p);
  ++stats.pinned_frees;
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* p) {
  count_context_call();
  const std::lock_guard<std::recursive_mutex> lock(mu);
  *attr = cudaPointerAttributes{};
  attr->type = cudaMemoryTypeUnregistered;
  if (const Alloc* a = find(p, 0)) {
    attr->type = a->pinned ? cudaMemoryTypeHost : cudaMemoryTypeDevice;
    attr->device = a->device;
    attr->devicePointer = const_cast<void*>(p);
    if (a->pinned) attr->hostPointer = const_cast<void*>(p);
  }
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  count_context_call();
  (void)flags;
  const std::lock_guard<std::recursive_mutex> lock(mu);
  FakeStream* s = new FakeStream;
  s->device = current_device;
  streams[s] = true;
  *stream = reinterpret_cast<cudaStream_t>(s);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  FakeStream* s = reinterpret_cast<FakeStream*>(stream);
  if (!streams.count(s)) return cudaErrorInvalidResourceHandle;
  flush(s);
  streams.erase(s);
  delete s;
  return cudaSuccess;
}

// Pending work is "still running" on the first query, done on the next: waits must poll.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  FakeStream* s = reinterpret_cast<FakeStream*>(stream);
  if (!s || s->ops.empty()) return cudaSuccess;
  flush(s);
  return cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  synk_fake_cuda_flush(stream);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  count_context_call();
  (void)flags;
  *event = reinterpret_cast<cudaEvent_t>(new FakeEvent);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<FakeEvent*>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  FakeEvent* e = reinterpret_cast<FakeEvent*>(event);
  FakeStream* s = reinterpret_cast<FakeStream*>(stream);
  if (s && !streams.count(s)) return cudaErrorInvalidResourceHandle;
  if (!s) flush_all();
  e->stream = s;
  e->seq = s ? s->enqueued : 0;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  FakeEvent* e = reinterpret_cast<FakeEvent*>(event);
  if (!e->stream || !streams.count(e->stream) || e->stream->executed >= e->seq) return cudaSuccess;
  run_until(e->stream, e->seq);
  return cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  FakeEvent* e = reinterpret_cast<FakeEvent*>(event);
  if (e->stream && streams.count(e->stream)) run_until(e->stream, e->seq);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  count_context_call();
  const std::lock_guard<std::recursive_mutex> lock(mu);
  if (!valid_copy(dst, src, n, kind)) return cudaErrorInvalidValue;
  count_copy(src, n, kind, true);
  enqueue(stream, [=] { std::memcpy(dst, src, n); });
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind) {
  count_context_call();
  const std::lock_guard<std::recursive_mutex> lock(mu);
  if (!valid_copy(dst, src, n, kind)) return cudaErrorInvalidValue;
  flush_all();
  std::memcpy(dst, src, n);
  return cudaSuccess;
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                                std::size_t n, cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  if (n && (!is_device(dst, n, dst_device) || !is_device(src, n, src_device)))
    return cudaErrorInvalidValue;
  ++stats.peer_copies;
  enqueue(stream, [=] { std::memcpy(dst, src, n); });
  return cudaSuccess;
}

cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device,
                           std::size_t n) {
  const std::lock_guard<std::recursive_mutex> lock(mu);
  const cudaError_t rc = cudaMemcpyPeerAsync(dst, dst_device, src, src_device, n, nullptr);
  return rc;
}

}  // extern "C"
