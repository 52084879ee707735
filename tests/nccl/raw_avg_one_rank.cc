// NCCL itself, no synk: ncclAvg on a one-rank communicator, out of place, for several float32
// counts, against a copy of the input (the average over one rank is the input). On an H100 with
// NCCL 2.28.3 synk's device grid found the last of 4,097 elements unwritten; this tells whether
// the NCCL in use does that, so that synk's copy in its place (nccl_backend.cc) stays justified.
// Exit 0: every element right; 1: some wrong (each case printed); 77: no CUDA device (skipped).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <vector>

namespace {

#define CHECK(expr)                                                            \
  do {                                                                         \
    if (!(expr)) {                                                             \
      std::fprintf(stderr, "raw_avg_one_rank: %s failed at line %d\n", #expr, \
                   __LINE__);                                                  \
      return 2;                                                                \
    }                                                                          \
  } while (0)

enum class Coll { all_reduce, reduce, reduce_scatter };
constexpr const char* kNames[] = {"ncclAllReduce", "ncclReduce", "ncclReduceScatter"};

// Runs one call; returns the number of elements that differ from the input, or -1 on an error.
long wrong_elements(ncclComm_t comm, cudaStream_t stream, Coll coll, ncclRedOp_t op,
                    std::size_t n) {
  std::vector<float> in(n), out(n, 111.0f);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i % 97 + 1);
  float *send = nullptr, *recv = nullptr;
  if (cudaMalloc(&send, n * sizeof(float)) != cudaSuccess) return -1;
  if (cudaMalloc(&recv, n * sizeof(float)) != cudaSuccess) return -1;
  cudaMemcpy(send, in.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(recv, out.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  ncclResult_t rc = ncclSuccess;
  if (coll == Coll::all_reduce) rc = ncclAllReduce(send, recv, n, ncclFloat32, op, comm, stream);
  if (coll == Coll::reduce) rc = ncclReduce(send, recv, n, ncclFloat32, op, 0, comm, stream);
  if (coll == Coll::reduce_scatter)
    rc = ncclReduceScatter(send, recv, n, ncclFloat32, op, comm, stream);
  if (rc != ncclSuccess || cudaStreamSynchronize(stream) != cudaSuccess) return -1;
  cudaMemcpy(out.data(), recv, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(send);
  cudaFree(recv);
  long wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += out[i] != in[i];
  return wrong;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("raw_avg_one_rank: no CUDA device: skipped\n");
    return 77;
  }
  int version = 0;
  ncclGetVersion(&version);
  ncclComm_t comm;
  int dev = 0;
  CHECK(ncclCommInitAll(&comm, 1, &dev) == ncclSuccess);
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream) == cudaSuccess);
  int bad = 0;
  for (Coll coll : {Coll::all_reduce, Coll::reduce, Coll::reduce_scatter}) {
    for (ncclRedOp_t op : {ncclSum, ncclAvg}) {
      for (std::size_t n : {1, 7, 1025, 4095, 4096, 4097, 4099, 8193, 65537, 1048577}) {
        const long wrong = wrong_elements(comm, stream, coll, op, n);
        if (wrong != 0) {
          ++bad;
          std::printf("NCCL %d: %s(%s, float32, %zu elements, 1 rank, out of place): %ld wrong\n",
                      version, kNames[static_cast<int>(coll)], op == ncclAvg ? "avg" : "sum", n,
                      wrong);
        }
      }
    }
  }
  ncclCommDestroy(comm);
  std::printf("raw_avg_one_rank: NCCL %d: %s\n", version,
              bad ? "some one-rank results are wrong (above)" : "every element right");
  return bad ? 1 : 0;
}
