// NCCL itself, no synk: what a non-blocking communicator (config.blocking = 0, synk's choice, so
// that SYNK_TIMEOUT can bound NCCL's start and calls) costs per call. In recent NCCL a group on
// such a communicator is launched from a thread that ncclGroupEnd starts and returns
// ncclInProgress; every collective is a group of one. On one rank NCCL runs a collective without
// the group, so this times what does take it there: a send and a receive to itself in a group,
// on a blocking and on a non-blocking one-rank communicator, plus a thread start and join on
// this host for scale. The difference is what each synk call on 2+ GPUs pays (docs/gpu.md).
// Exit 0 with the medians printed; 2 on an error; 77: no CUDA device (skipped).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kCalls = 2000;

double median_us(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Waits out ncclInProgress on a non-blocking communicator, as synk's NcclComm::issue does.
bool settle(ncclComm_t comm, ncclResult_t rc) {
  while (rc == ncclInProgress) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return false;
    rc = state;
  }
  return rc == ncclSuccess;
}

// The median time of a self send and receive in a group, to the end of the work on the stream.
double group_call_us(bool blocking, void* send, void* recv, std::size_t bytes, bool& ok) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  ok = ncclGetUniqueId(&id) == ncclSuccess &&
       settle(comm, ncclCommInitRankConfig(&comm, 1, id, 0, &config));
  cudaStream_t stream = nullptr;
  ok = ok && cudaStreamCreate(&stream) == cudaSuccess;
  std::vector<double> us;
  for (int i = 0; ok && i < kCalls + 100; ++i) {
    const Clock::time_point t0 = Clock::now();
    ok = ncclGroupStart() == ncclSuccess &&
         ncclSend(send, bytes, ncclChar, 0, comm, stream) == ncclSuccess &&
         ncclRecv(recv, bytes, ncclChar, 0, comm, stream) == ncclSuccess &&
         settle(comm, ncclGroupEnd()) && cudaStreamSynchronize(stream) == cudaSuccess;
    const std::chrono::duration<double, std::micro> took = Clock::now() - t0;
    if (i >= 100) us.push_back(took.count());
  }
  if (comm) ncclCommDestroy(comm);
  if (stream) cudaStreamDestroy(stream);
  return ok ? median_us(us) : 0;
}

double thread_start_join_us() {
  std::vector<double> us;
  for (int i = 0; i < kCalls; ++i) {
    const Clock::time_point t0 = Clock::now();
    std::thread([] {}).join();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return median_us(us);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("group_thread_probe: no CUDA device: skipped\n");
    return 77;
  }
  int version = 0;
  ncclGetVersion(&version);
  const std::size_t bytes = 8;
  void *send = nullptr, *recv = nullptr;
  if (cudaMalloc(&send, bytes) != cudaSuccess || cudaMalloc(&recv, bytes) != cudaSuccess) {
    std::fprintf(stderr, "group_thread_probe: cudaMalloc failed\n");
    return 2;
  }
  bool ok_blocking = false, ok_nonblocking = false;
  // Alternated twice, so that a warming host does not favour one.
  double blocking = 0, nonblocking = 0;
  for (int round = 0; round < 2; ++round) {
    blocking = group_call_us(true, send, recv, bytes, ok_blocking);
    nonblocking = group_call_us(false, send, recv, bytes, ok_nonblocking);
  }
  cudaFree(send);
  cudaFree(recv);
  if (!ok_blocking || !ok_nonblocking) {
    std::fprintf(stderr, "group_thread_probe: an NCCL or CUDA call failed (blocking %d, "
                         "non-blocking %d)\n", ok_blocking, ok_nonblocking);
    return 2;
  }
  std::printf("group_thread_probe: NCCL %d: self send+recv of %zu B in a group, median of %d: "
              "blocking %.2f us, non-blocking %.2f us (+%.2f); a thread start and join here "
              "%.2f us\n",
              version, bytes, kCalls, blocking, nonblocking, nonblocking - blocking,
              thread_start_join_us());
  return 0;
}
