// DeviceBuffer and the device helpers of device_cuda.h (builds with CUDA/NCCL only).
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "backends/nccl/nccl_comm.h"
#include "core/backoff.h"
#include "core/env.h"
#include "device/device_cuda.h"
#include "synk/device.h"

namespace synk {

namespace detail {

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline() {
  return Clock::now() + wait_duration(settings().timeout_s);
}

// Polls `query` (cudaEventQuery or cudaStreamQuery) until it is not cudaErrorNotReady.
template <class Query>
void poll(Query query, const std::string& op, const char* call, const char* what) {
  const Clock::time_point end = deadline();
  int spins = 0;
  while (true) {
    const cudaError_t rc = query();
    if (rc == cudaSuccess) return;
    if (rc != cudaErrorNotReady) throw_cuda_error(rc, (op + ": " + call).c_str());
    if (Clock::now() > end) {
      throw Error(ErrorCode::Timeout, op + ": waited more than " +
                                          seconds_text(settings().timeout_s) +
                                          " (SYNK_TIMEOUT) for " + what + " on the device");
    }
    backoff(spins);
  }
}

}  // namespace

int visible_devices(const std::string& who) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    throw Error(ErrorCode::NotSupported, who + ": no CUDA device is visible (cudaGetDeviceCount: " +
                                             cudaGetErrorString(rc) + ")");
  }
  if (count <= 0) {
    throw Error(ErrorCode::NotSupported,
                who + ": no CUDA device is visible (cudaGetDeviceCount: found 0 devices)");
  }
  return count;
}

void check_visible(int device, const std::string& who) {
  const int count = visible_devices(who);
  if (device < 0 || device >= count) {
    throw Error(ErrorCode::InvalidArgument, who + ": CUDA device " + std::to_string(device) +
                                                " is not visible: this rank sees " +
                                                std::to_string(count) + " device(s) (cuda0..cuda" +
                                                std::to_string(count - 1) + ")");
  }
}

int default_device(const std::string& who) {
  visible_devices(who);
  if (const std::optional<int> nccl = nccl_process_device()) return *nccl;
  int current = 0;
  SYNK_CHECK_CUDA(cudaGetDevice(&current));
  return current;
}

void wait_event(cudaEvent_t event, const std::string& op) {
  poll([event] { return cudaEventQuery(event); }, op, "cudaEventQuery(event)", "a copy");
}

void wait_stream(cudaStream_t stream, const std::string& op) {
  poll([stream] { return cudaStreamQuery(stream); }, op, "cudaStreamQuery(stream)",
       "the work queued on the stream");
}

cudaStream_t copy_stream(int device) {
  static std::mutex mu;
  static std::map<int, cudaStream_t> streams;  // never destroyed: see device_cuda.h
  const std::lock_guard<std::mutex> lock(mu);
  cudaStream_t& s = streams[device];
  if (!s) {
    DeviceGuard guard(device);
    SYNK_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  return s;
}

void copy_and_wait(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, int device,
                   const std::string& op) {
  if (bytes == 0) return;
  const cudaStream_t stream = copy_stream(device);
  DeviceGuard guard(device);
  SYNK_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, stream));
  wait_stream(stream, op);
}

}  // namespace detail

int device_count() { return detail::visible_devices("device_count"); }

DeviceBuffer::DeviceBuffer(std::size_t bytes, int device) : device_(device) {
  detail::check_visible(device, "DeviceBuffer");
  bytes_ = bytes;
  if (bytes == 0) return;  // a valid, empty buffer on the device
  detail::DeviceGuard guard(device);
  SYNK_CHECK_CUDA(cudaMalloc(&data_, bytes));
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(other.data_), bytes_(other.bytes_), device_(other.device_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
  other.device_ = -1;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_;
    bytes_ = other.bytes_;
    device_ = other.device_;
    other.data_ = nullptr;
    other.bytes_ = 0;
    other.device_ = -1;
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (data_) {
    const detail::QuietDeviceGuard guard(device_);  // the buffer's own device, to be safe
    cudaFree(data_);  // waits for the device's work that may still use it
  }
  data_ = nullptr;
  bytes_ = 0;
}

namespace {

void check_range(const char* op, std::size_t bytes, std::size_t offset, std::size_t size) {
  if (offset > size || bytes > size - offset) {
    throw Error(ErrorCode::InvalidArgument, std::string(op) + ": " + std::to_string(bytes) +
                                                " bytes at offset " + std::to_string(offset) +
                                                " pass the end of the " + std::to_string(size) +
                                                "-byte DeviceBuffer");
  }
}

}  // namespace

void DeviceBuffer::copy_from_host(const void* src, std::size_t bytes, std::size_t offset) {
  check_range("DeviceBuffer::copy_from_host", bytes, offset, bytes_);
  detail::copy_and_wait(static_cast<unsigned char*>(data_) + offset, src, bytes,
                        cudaMemcpyHostToDevice, device_, "DeviceBuffer::copy_from_host");
}

void DeviceBuffer::copy_to_host(void* dst, std::size_t bytes, std::size_t offset) const {
  check_range("DeviceBuffer::copy_to_host", bytes, offset, bytes_);
  detail::copy_and_wait(dst, static_cast<const unsigned char*>(data_) + offset, bytes,
                        cudaMemcpyDeviceToHost, device_, "DeviceBuffer::copy_to_host");
}

}  // namespace synk
