// DeviceStager (builds with CUDA/NCCL only): rows gathered on the CPU into one of two pinned host
// buffers, then one cudaMemcpyAsync of them to the device. Pinned memory is what lets the copy
// run asynchronously at full PCIe speed (from pageable memory CUDA copies through a bounce
// buffer of its own first); two buffers let the gather of batch k+1 overlap the copy of batch k.
// Before a buffer is written again, the event recorded after its last copy is waited for.
#include <algorithm>
#include <cstring>
#include <string>

#include "backends/nccl/nccl_comm.h"
#include "core/logging.h"
#include "device/device_cuda.h"
#include "synk/device.h"

namespace synk {

namespace {

struct Pinned {
  void* data = nullptr;
  std::size_t bytes = 0;
  cudaEvent_t copied = nullptr;  // recorded after the last copy out of this buffer
  bool in_flight = false;        // `copied` was recorded and not yet waited for
};

}  // namespace

struct DeviceStager::Impl {
  int device = -1;
  cudaStream_t own = nullptr;
  Pinned buf[2];
  int next = 0;  // the buffer the next stage() fills

  void wait_for(Pinned& b, const char* op) {
    if (!b.in_flight) return;
    detail::wait_event(b.copied, op);
    b.in_flight = false;
  }

  // Room for `bytes` in b (whose previous copy has completed): grows by half again at least, so
  // a slowly growing batch size does not reallocate every time.
  void reserve(Pinned& b, std::size_t bytes) {
    if (b.bytes >= bytes) return;
    const std::size_t grown = std::max(bytes, b.bytes + b.bytes / 2);
    if (b.data) cudaFreeHost(b.data);
    b.data = nullptr;
    b.bytes = 0;
    // Portable: usable from every device's context, whichever is current when it is copied.
    SYNK_CHECK_CUDA(cudaHostAlloc(&b.data, grown, cudaHostAllocPortable));
    b.bytes = grown;
    SYNK_LOG_AT(debug, "DeviceStager: pinned buffer " << (&b - buf) << " grown to " << grown
                                                      << " bytes (cuda" << device << ")");
  }
};

DeviceStager::DeviceStager(int device) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.device = device < 0 ? detail::default_device("DeviceStager") : device;
  detail::check_visible(m.device, "DeviceStager");
  detail::DeviceGuard guard(m.device);
  try {
    SYNK_CHECK_CUDA(cudaStreamCreateWithFlags(&m.own, cudaStreamNonBlocking));
    for (Pinned& b : m.buf) {
      SYNK_CHECK_CUDA(cudaEventCreateWithFlags(&b.copied, cudaEventDisableTiming));
    }
  } catch (...) {
    for (Pinned& b : m.buf) {
      if (b.copied) cudaEventDestroy(b.copied);
    }
    if (m.own) cudaStreamDestroy(m.own);
    throw;
  }
}

DeviceStager::~DeviceStager() {
  Impl& m = *impl_;
  const detail::QuietDeviceGuard guard(m.device);
  for (Pinned& b : m.buf) {
    try {
      m.wait_for(b, "~DeviceStager");
    } catch (const Error& e) {
      // A copy that never finished may still read the buffer: leaking it is the safe choice.
      SYNK_LOG_AT(warn, "DeviceStager: " << e.what() << "; its pinned buffer is not freed");
      b.data = nullptr;
    }
    if (b.data) cudaFreeHost(b.data);
    if (b.copied) cudaEventDestroy(b.copied);
  }
  if (m.own) cudaStreamDestroy(m.own);
}

std::size_t DeviceStager::stage(const void* base, std::size_t rows, std::size_t row_bytes,
                                const RowSelection& sel, void* dst, Stream stream) {
  Impl& m = *impl_;
  const std::size_t n = sel.size();
  // One check of the whole selection before any byte moves.
  if (sel.indices.empty()) {
    // The last row, start + (n - 1) * step, checked for overflow: a huge step wrapped round to a
    // row in range, and the gather then read far outside the data.
    std::size_t last = 0;
    const bool wraps = n > 0 && (__builtin_mul_overflow(n - 1, sel.step, &last) ||
                                 __builtin_add_overflow(last, sel.start, &last));
    if (wraps) {
      throw Error(ErrorCode::InvalidArgument,
                  "DeviceStager::stage: the last row, " + std::to_string(sel.start) + " + " +
                      std::to_string(n - 1) + " x " + std::to_string(sel.step) +
                      ", is past 2^64, out of range for " + std::to_string(rows) + " rows");
    }
    if (n > 0 && last >= rows) {
      throw Error(ErrorCode::InvalidArgument, "DeviceStager::stage: row " + std::to_string(last) +
                                                  " is out of range for " +
                                                  std::to_string(rows) + " rows");
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      if (sel.indices[i] >= rows) {
        throw Error(ErrorCode::InvalidArgument, "DeviceStager::stage: index " + std::to_string(i) +
                                                    " is row " + std::to_string(sel.indices[i]) +
                                                    ", out of range for " + std::to_string(rows) +
                                                    " rows");
      }
    }
  }
  const std::size_t bytes = n * row_bytes;
  if (bytes == 0) return 0;
  if (dst == nullptr) {
    throw Error(ErrorCode::InvalidArgument, "DeviceStager::stage: dst is null but " +
                                                std::to_string(bytes) + " bytes are to be copied");
  }

  Pinned& b = m.buf[m.next];
  m.wait_for(b, "DeviceStager::stage");  // its previous copy must be done reading it
  m.reserve(b, bytes);
  const unsigned char* src = static_cast<const unsigned char*>(base);
  unsigned char* out = static_cast<unsigned char*>(b.data);
  if (sel.contiguous()) {
    std::memcpy(out, src + sel.start * row_bytes, bytes);
  } else {
    detail::gather_rows(src, row_bytes, sel, out);  // the same gather as Data::take
  }

  const cudaStream_t s = stream ? stream : m.own;
  detail::DeviceGuard guard(m.device);
  SYNK_CHECK_CUDA(cudaMemcpyAsync(dst, b.data, bytes, cudaMemcpyHostToDevice, s));
  const cudaError_t rc = cudaEventRecord(b.copied, s);
  if (rc != cudaSuccess) {
    detail::wait_stream(s, "DeviceStager::stage");  // no event to wait for before reusing b
    detail::throw_cuda_error(rc, "cudaEventRecord(copied, stream)");
  }
  b.in_flight = true;
  m.next ^= 1;
  return bytes;
}

void DeviceStager::wait() {
  for (Pinned& b : impl_->buf) impl_->wait_for(b, "DeviceStager::wait");
}

int DeviceStager::device() const { return impl_->device; }
Stream DeviceStager::stream() const { return impl_->own; }
std::size_t DeviceStager::pinned_bytes() const { return impl_->buf[0].bytes + impl_->buf[1].bytes; }

}  // namespace synk
