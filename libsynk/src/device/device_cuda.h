// What the device files share (builds with CUDA/NCCL only): the visible-device checks, waits on
// events and streams with the SYNK_TIMEOUT deadline, and blocking copies on a per-device stream.
#pragma once

#include <cstddef>
#include <string>

#include "backends/nccl/nccl_check.h"

namespace synk::detail {

// The number of visible devices; NotSupported, naming `who` and CUDA's reason, when none.
int visible_devices(const std::string& who);
// InvalidArgument, naming `who`, when `device` is not one of the visible devices.
void check_visible(int device, const std::string& who);
// The device a stager or buffer uses by default: the NCCL device of this process, else the
// current one.
int default_device(const std::string& who);

// DeviceGuard for destructors: makes `device` current if it can, restores the previous one,
// never throws.
class QuietDeviceGuard {
 public:
  explicit QuietDeviceGuard(int device) noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (device >= 0 && previous_ != device) cudaSetDevice(device);
  }
  ~QuietDeviceGuard() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) {
      cudaSetDevice(previous_);
    }
  }
  QuietDeviceGuard(const QuietDeviceGuard&) = delete;
  QuietDeviceGuard& operator=(const QuietDeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Polls until the event has passed or the stream is idle; Timeout naming `op` after SYNK_TIMEOUT
// (a blocking cudaEventSynchronize could wait forever on a hung device).
void wait_event(cudaEvent_t event, const std::string& op);
void wait_stream(cudaStream_t stream, const std::string& op);

// A non-blocking stream of `device` for synk's own copies, created once and kept for the life
// of the process (destroying it at exit could run after the CUDA runtime's own teardown).
cudaStream_t copy_stream(int device);

// A copy on copy_stream(device), waited for: device is where the device side of the copy is.
void copy_and_wait(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, int device,
                   const std::string& op);

}  // namespace synk::detail
