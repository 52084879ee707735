// NcclComm: one NCCL communicator with its device, stream and scratch buffer, the waits on it
// (each with the SYNK_TIMEOUT deadline) and its abort. bootstrap_nccl() creates it: device
// choice, one-device-per-rank check, unique id over MPI, non-blocking init.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/nccl/nccl_check.h"
#include "core/backend.h"
#include "synk/request.h"

namespace synk::detail {

// Makes `device` current for a scope and restores the caller's device after it.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

class NcclComm {
 public:
  using Clock = std::chrono::steady_clock;

  NcclComm(ncclComm_t comm, int device, int rank, int size, double timeout_s);
  ~NcclComm();  // finalizes and destroys the communicator (or nothing, once aborted)
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  int device() const { return device_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  cudaStream_t stream_for(void* caller_stream) const;
  void* scratch() const { return scratch_; }  // one int32 on the device, for barrier
  Clock::time_point deadline() const;         // now + SYNK_TIMEOUT
  double timeout_s() const { return timeout_s_; }

  // Throws InvalidUsage once the communicator has been aborted.
  void check_usable(const char* op) const;
  // The result of an NCCL call on this communicator: ncclInProgress is polled to completion
  // (deadline), any error becomes synk::Error naming op and the call.
  void issue(const char* op, const char* call, ncclResult_t rc);
  // Throws (after aborting) when NCCL reports an asynchronous error.
  void check_async(const char* op);
  // ncclCommAbort, once; later calls throw InvalidUsage naming `why`.
  void abort(const std::string& why) noexcept;
  // Records an event on `stream` after the work of `op` and returns the Request that waits on it.
  Request finish(const char* op, cudaStream_t stream, std::shared_ptr<NcclComm> self);
  // An event for finish(), from those returned (any thread) or new; back when its Request ends.
  cudaEvent_t take_event();
  void return_event(cudaEvent_t event) noexcept;

 private:
  ncclComm_t comm_;
  int device_;
  int rank_;
  int size_;
  double timeout_s_;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  // A waiting thread may abort while another issues: the flag is read without the lock, the
  // reason (set before the flag) under it. (An NCCL call that another thread has already begun
  // past its check may still meet the communicator ncclCommAbort frees: not yet guarded.)
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mu_;
  std::string abort_reason_;
  std::mutex events_mu_;
  std::vector<cudaEvent_t> free_events_;
};

// The CUDA device this process's NCCL communicators use, once the first one has chosen it.
std::optional<int> nccl_process_device();
// That device, chosen now if no communicator has (made current, and kept for them): for device
// memory placed before NCCL starts (DeviceShared on an auto communicator). local_rank: the
// launcher's, else the rank's on its node. NotSupported without a visible device.
int choose_process_device(int local_rank);

// Collective over ctx.comm. Throws NotSupported when no CUDA device is visible, InvalidUsage when
// two ranks would share a device, Remote when another rank failed, Timeout/Backend from NCCL.
std::shared_ptr<NcclComm> bootstrap_nccl(const CommContext& ctx);

}  // namespace synk::detail
