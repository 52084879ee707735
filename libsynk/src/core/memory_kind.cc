// See memory_kind.h. The driver's cuPointerGetAttribute is looked up, not linked: a program that
// never loads CUDA's driver (a CPU program on a GPU node) makes no CUDA call at all here.
#include "core/memory_kind.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <mutex>
#include <string>

#include "synk/error.h"

namespace synk::detail {

namespace {

// The driver API's values (cuda.h), so that no CUDA header is needed here.
constexpr int kMemoryTypeAttribute = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kIsManagedAttribute = 8;   // CU_POINTER_ATTRIBUTE_IS_MANAGED
constexpr unsigned kMemoryTypeDevice = 2;  // CU_MEMORYTYPE_DEVICE
constexpr unsigned kMemoryTypeUnified = 4;  // CU_MEMORYTYPE_UNIFIED
using GetAttribute = int (*)(void* data, int attribute, unsigned long long ptr);

// How many shared objects the process has loaded so far (glibc counts them): a lookup that
// found no driver is tried again only after this has moved.
unsigned long long objects_loaded() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;  // the first object tells
      },
      &adds);
  return adds;
}

GetAttribute find_driver() {
  void* f = nullptr;
  if (void* lib = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY)) {  // loaded already, or not
    f = dlsym(lib, "cuPointerGetAttribute");
    dlclose(lib);  // drops the reference NOLOAD took; the library stays
  }
  if (!f) f = dlsym(RTLD_DEFAULT, "cuPointerGetAttribute");  // a test's fake device
  return reinterpret_cast<GetAttribute>(f);
}

GetAttribute driver() {
  static std::atomic<GetAttribute> found{nullptr};
  static std::atomic<unsigned long long> looked_at{~0ull};
  if (GetAttribute f = found.load(std::memory_order_acquire)) return f;
  const unsigned long long loaded = objects_loaded();
  if (loaded == looked_at.load(std::memory_order_acquire)) return nullptr;
  static std::mutex mu;
  std::lock_guard lk(mu);
  GetAttribute f = find_driver();
  if (f) found.store(f, std::memory_order_release);
  looked_at.store(loaded, std::memory_order_release);
  return f;
}

MemoryKind kind_with(GetAttribute get, const void* p) {
  if (p == nullptr) return MemoryKind::none;
  if (get == nullptr) return MemoryKind::host;  // no driver loaded: no device memory exists
  const auto address = reinterpret_cast<unsigned long long>(p);
  unsigned type = 0;
  // Any error (the driver not initialized, memory it does not know) means host memory.
  if (get(&type, kMemoryTypeAttribute, address) != 0) return MemoryKind::host;
  if (type == kMemoryTypeDevice || type == kMemoryTypeUnified) return MemoryKind::device;
  unsigned managed = 0;
  if (get(&managed, kIsManagedAttribute, address) == 0 && managed) return MemoryKind::device;
  return MemoryKind::host;
}

}  // namespace

CallBuffers call_buffers(const CollArgs& a, int rank) {
  const bool root = rank == a.root;
  CallBuffers out;
  const auto add = [&out](const char* name, const void* p) { out.at[out.n++] = {name, p}; };
  switch (a.coll) {
    case Collective::all_reduce:
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
    case Collective::all_to_allv:
      add("send", a.send);
      add("recv", a.recv);
      break;
    case Collective::reduce:
    case Collective::gather:
    case Collective::gatherv:
      add("send", a.send);
      if (root) add("recv", a.recv);
      break;
    case Collective::broadcast:
      add("buf", a.recv);
      break;
    case Collective::scatter:
    case Collective::scatterv:
      add("recv", a.recv);
      if (root) add("send", a.send);
      break;
    case Collective::barrier:
      break;
  }
  return out;
}

MemoryKind call_memory(const CollArgs& a, int rank) {
  const CallBuffers buffers = call_buffers(a, rank);
  const GetAttribute get = buffers.n > 0 ? driver() : nullptr;  // once: its check costs ~10 ns
  MemoryKind kind = MemoryKind::none;
  const char* first = nullptr;
  for (int i = 0; i < buffers.n; ++i) {
    const MemoryKind k = kind_with(get, buffers.at[i].p);
    if (k == MemoryKind::none) continue;
    if (kind != MemoryKind::none && k != kind) {
      throw Error(ErrorCode::InvalidArgument,
                  std::string(to_string(a.coll)) + ": " + first + " is " +
                      (kind == MemoryKind::device ? "device" : "host") + " memory but " +
                      buffers.at[i].name + " is " +
                      (k == MemoryKind::device ? "device" : "host") +
                      " memory; a call's buffers must be of one kind");
    }
    kind = k;
    first = buffers.at[i].name;
  }
  return kind;
}

}  // namespace synk::detail
