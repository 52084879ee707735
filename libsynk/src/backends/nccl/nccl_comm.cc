// See nccl_comm.h: the communicator's lifetime, its waits and the Request of an operation.
#include "backends/nccl/nccl_comm.h"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

#include "core/backoff.h"
#include "core/call_name.h"
#include "core/logging.h"
#include "core/mpi_runtime.h"

namespace synk::detail {

namespace {

// Completion of one operation: an event recorded on its stream after it.
class NcclPending final : public Request::Pending {
 public:
  NcclPending(std::shared_ptr<NcclComm> comm, cudaEvent_t event, const char* op)
      : comm_(std::move(comm)), event_(event), op_(op), deadline_(comm_->deadline()) {}
  // (comm_ is initialized before deadline_: members are initialized in declaration order.)
  // A Request dropped before it completes still waits (communicator.h): the caller may then
  // reuse its buffers, and an event goes back to the pool only once nothing is pending on it.
  ~NcclPending() override {
    if (!done_ && !failed_) {
      try {
        wait();
      } catch (const std::exception& e) {  // nobody is left to hear it but the log
        SYNK_LOG_AT(warn, op_ << ": a dropped Request's wait failed: " << e.what());
      }
    }
    comm_->return_event(event_);
  }
  NcclPending(const NcclPending&) = delete;
  NcclPending& operator=(const NcclPending&) = delete;

  // wait_any() polls this: past the deadline it times out as wait() does.
  bool test() override {
    if (poll(true)) return true;
    if (NcclComm::Clock::now() > deadline_) throw_timeout();
    return false;
  }

  // The device's work is waited for as cudaStreamSynchronize would, on a core of the rank's own
  // (synkrun binds one): yielding between polls, for kYieldFor. A wait longer than that is a
  // peer's delay or a large transfer, and sleeps between polls, so a stuck peer costs no core;
  // a sleep's late wake-up is then a small part of the wait. NCCL's asynchronous errors (a peer
  // lost) are asked for every kPollsPerErrorCheck polls, not on each.
  void wait() override {
    const NcclComm::Clock::time_point start = NcclComm::Clock::now();
    for (std::uint64_t polls = 1; !poll(polls % kPollsPerErrorCheck == 0); ++polls) {
      const NcclComm::Clock::time_point now = NcclComm::Clock::now();
      if (now > deadline_) throw_timeout();
      if (now - start < kYieldFor) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

 private:
  static constexpr std::chrono::milliseconds kYieldFor{20};
  static constexpr std::uint64_t kPollsPerErrorCheck = 64;

  // Whether the operation is done. NCCL's asynchronous errors are asked for when check_nccl,
  // and always once it is done: a peer lost can let the kernels end with wrong data.
  bool poll(bool check_nccl) {
    if (done_) return true;
    if (check_nccl) check_async();
    const cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    if (rc == cudaSuccess && !check_nccl) check_async();
    if (rc != cudaSuccess) {
      cudaGetLastError();  // clears a non-sticky error so later calls do not see it
      failed_ = true;
      comm_->abort(std::string(op_) + " failed on the device");
      throw Error(ErrorCode::Backend, std::string(op_) +
                                          ": cudaEventQuery failed: " + cudaGetErrorString(rc) +
                                          " (the NCCL communicator was aborted)");
    }
    done_ = true;
    return true;
  }

  void check_async() {
    try {
      comm_->check_async(op_);
    } catch (...) {
      failed_ = true;
      throw;
    }
  }

  [[noreturn]] void throw_timeout() {
    failed_ = true;
    comm_->abort(std::string(op_) + " timed out");
    throw Error(ErrorCode::Timeout,
                std::string(op_) + ": rank " + std::to_string(comm_->rank()) + " of " +
                    std::to_string(comm_->size()) +
                    " waited for the NCCL operation on its stream for more than " +
                    seconds_text(comm_->timeout_s()) +
                    " (SYNK_TIMEOUT); the NCCL communicator was aborted (ncclCommAbort)");
  }

  std::shared_ptr<NcclComm> comm_;
  cudaEvent_t event_;
  const char* op_;
  NcclComm::Clock::time_point deadline_;
  bool done_ = false;
  bool failed_ = false;  // the wait timed out or the device failed: the communicator is aborted
};

}  // namespace

std::string nccl_message(ncclResult_t rc) {
  std::string m = ncclGetErrorString(rc);
  const char* last = ncclGetLastError(nullptr);  // the comm argument is unused by NCCL
  if (last && *last) m += std::string(": ") + last;
  return m;
}

void throw_cuda_error(cudaError_t rc, const char* call) {
  cudaGetLastError();  // a non-sticky error must not resurface in the next call
  throw Error(ErrorCode::Backend,
              std::string(call_name(call)) + " failed: " + cudaGetErrorString(rc));
}

void throw_nccl_error(ncclResult_t rc, const char* call) {
  throw Error(ErrorCode::Backend, std::string(call_name(call)) + " failed: " + nccl_message(rc));
}

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device) SYNK_CHECK_CUDA(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) {
    cudaSetDevice(previous_);
  }
}

NcclComm::NcclComm(ncclComm_t comm, int device, int rank, int size, double timeout_s)
    : comm_(comm), device_(device), rank_(rank), size_(size), timeout_s_(timeout_s) {
  try {
    DeviceGuard guard(device_);
    SYNK_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SYNK_CHECK_CUDA(cudaMalloc(&scratch_, sizeof(int)));
  } catch (...) {
    abort("its setup failed");
    if (stream_) cudaStreamDestroy(stream_);
    throw;
  }
}

NcclComm::~NcclComm() {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaSetDevice(device_);
  if (!aborted_) {
    // Finalize flushes the queued work; it is non-blocking, so poll it with the deadline.
    ncclResult_t rc = ncclCommFinalize(comm_);
    const Clock::time_point end = deadline();
    int spins = 0;
    while (rc == ncclSuccess || rc == ncclInProgress) {
      ncclResult_t state = ncclSuccess;
      rc = ncclCommGetAsyncError(comm_, &state);
      if (rc != ncclSuccess || state != ncclInProgress) {
        rc = rc == ncclSuccess ? state : rc;
        break;
      }
      if (Clock::now() > end) break;
      backoff(spins);
    }
    if (rc == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      SYNK_LOG_AT(warn, "nccl: finalizing the communicator did not complete ("
                            << (rc == ncclInProgress ? "timeout" : nccl_message(rc))
                            << "); aborting it");
      ncclCommAbort(comm_);
    }
  }
  for (cudaEvent_t event : free_events_) cudaEventDestroy(event);
  if (scratch_) cudaFree(scratch_);
  if (stream_) cudaStreamDestroy(stream_);
  if (previous >= 0 && previous != device_) cudaSetDevice(previous);
}

cudaStream_t NcclComm::stream_for(void* caller_stream) const {
  return caller_stream ? static_cast<cudaStream_t>(caller_stream) : stream_;
}

NcclComm::Clock::time_point NcclComm::deadline() const {
  return Clock::now() + wait_duration(timeout_s_);
}

void NcclComm::check_usable(const char* op) const {
  if (!aborted_.load(std::memory_order_acquire)) return;
  std::string why;
  {
    const std::lock_guard<std::mutex> lock(abort_mu_);
    why = abort_reason_;
  }
  throw Error(ErrorCode::InvalidUsage, std::string(op) +
                                           ": the NCCL communicator was aborted earlier (" + why +
                                           "); create a new synk::Communicator");
}

void NcclComm::issue(const char* op, const char* call_text, ncclResult_t rc) {
  if (rc == ncclSuccess) return;
  const std::string call(call_name(call_text));
  if (rc != ncclInProgress) {
    const std::string msg = nccl_message(rc);
    abort(std::string(op) + ": " + call + " failed");
    throw Error(ErrorCode::Backend, std::string(op) + ": " + call + " failed: " + msg +
                                        " (the NCCL communicator was aborted)");
  }
  // Non-blocking communicator: the call is still being enqueued.
  const Clock::time_point end = deadline();
  int spins = 0;
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
    if (q != ncclSuccess) state = q;
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      const std::string msg = nccl_message(state);
      abort(std::string(op) + ": " + call + " failed");
      throw Error(ErrorCode::Backend, std::string(op) + ": " + call + " failed: " + msg +
                                          " (the NCCL communicator was aborted)");
    }
    if (Clock::now() > end) {
      abort(std::string(op) + " timed out");
      throw Error(ErrorCode::Timeout,
                  std::string(op) + ": rank " + std::to_string(rank_) + " of " +
                      std::to_string(size_) + ": " + call + " was still in progress after " +
                      seconds_text(timeout_s_) +
                      " (SYNK_TIMEOUT); the NCCL communicator was aborted (ncclCommAbort)");
    }
    backoff(spins);
  }
}

void NcclComm::check_async(const char* op) {
  if (aborted_) check_usable(op);
  ncclResult_t state = ncclSuccess;
  const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
  if (q != ncclSuccess) state = q;
  if (state == ncclSuccess || state == ncclInProgress) return;
  const std::string msg = nccl_message(state);
  abort(std::string(op) + ": asynchronous NCCL error");
  throw Error(ErrorCode::Backend, std::string(op) + ": rank " + std::to_string(rank_) + " of " +
                                      std::to_string(size_) + ": NCCL reported an error: " + msg +
                                      " (the NCCL communicator was aborted)");
}

void NcclComm::abort(const std::string& why) noexcept {
  {
    const std::lock_guard<std::mutex> lock(abort_mu_);  // once, though two threads may fail
    if (aborted_.load(std::memory_order_relaxed)) return;
    try {
      abort_reason_ = why;
    } catch (...) {
    }
    aborted_.store(true, std::memory_order_release);
  }
  // The other ranks may be stuck in the aborted operation: exiting must not wait for them.
  note_peer_lost();
  SYNK_LOG_AT(warn, "nccl: aborting the communicator: " << why);
  ncclCommAbort(comm_);
}

Request NcclComm::finish(const char* op, cudaStream_t stream, std::shared_ptr<NcclComm> self) {
  const cudaEvent_t event = take_event();
  const cudaError_t rc = cudaEventRecord(event, stream);
  if (rc != cudaSuccess) {
    return_event(event);
    throw_cuda_error(rc, "cudaEventRecord(event, stream)");
  }
  return Request(std::make_shared<NcclPending>(std::move(self), event, op));
}

// Events are reused: creating and destroying one per call cost more than the rest of synk's
// part of a small call.
cudaEvent_t NcclComm::take_event() {
  {
    const std::lock_guard<std::mutex> lock(events_mu_);
    if (!free_events_.empty()) {
      const cudaEvent_t event = free_events_.back();
      free_events_.pop_back();
      return event;
    }
  }
  cudaEvent_t event = nullptr;
  SYNK_CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void NcclComm::return_event(cudaEvent_t event) noexcept {
  try {
    const std::lock_guard<std::mutex> lock(events_mu_);
    free_events_.push_back(event);
  } catch (...) {  // no room to keep it
    cudaEventDestroy(event);
  }
}

}  // namespace synk::detail
