// See gpu_kernels.h: the kernels and their launches, one thread per element (or row, or column).
#include "gpu_kernels.h"

namespace fmnist::gpu {

namespace {

constexpr int kThreads = 256;
unsigned blocks(std::size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void scale_bytes_kernel(const std::uint8_t* in, float* out, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = static_cast<float>(in[i]) * (1.0f / 255.0f);
}

// out[r][c] += b[c], then ReLU where relu.
__global__ void add_bias_kernel(float* out, const float* b, std::size_t rows, int cols, bool relu) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= rows * cols) return;
  const float v = out[i] + b[i % cols];
  out[i] = relu ? fmaxf(v, 0.0f) : v;
}

// One thread per row: -log softmax(row)[label], stably; dlogits = softmax - onehot; the batch's
// loss sum (double, as the CPU path sums it) and correct count (the first largest logit).
__global__ void softmax_cross_entropy_kernel(const float* logits, const std::uint8_t* labels,
                                      std::size_t rows, int classes, float* dlogits,
                                      double* batch_loss, unsigned long long* correct) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const float* row = logits + r * classes;
  int best = 0;
  for (int c = 1; c < classes; ++c)
    if (row[c] > row[best]) best = c;
  const float max = row[best];
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) sum += expf(row[c] - max);
  const int label = labels[r];
  atomicAdd(batch_loss, static_cast<double>(logf(sum) - (row[label] - max)));
  if (best == label) atomicAdd(correct, 1ull);
  for (int c = 0; c < classes; ++c)
    dlogits[r * classes + c] = expf(row[c] - max) / sum - (c == label ? 1.0f : 0.0f);
}

// db[c] = sum over rows of delta[r][c].
__global__ void column_sums_kernel(const float* delta, std::size_t rows, int cols, float* db) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (std::size_t r = 0; r < rows; ++r) s += delta[r * cols + c];
  db[c] = s;
}

// ReLU': the stored activation is positive exactly where its input was.
__global__ void relu_backward_kernel(float* delta, const float* act, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n && !(act[i] > 0.0f)) delta[i] = 0.0f;
}

// The two floats after the gradient; the batch's loss into the epoch's sum.
__global__ void finish_sums_kernel(double* batch_loss, double* epoch_loss, float* tail) {
  tail[0] = static_cast<float>(*batch_loss);
  tail[1] = isfinite(tail[0]) ? 0.0f : 1.0f;
  *epoch_loss += *batch_loss;
  *batch_loss = 0.0;
}

// optimizer.h's rules, element by element.
__global__ void sgd_momentum_kernel(float* p, float* v, const float* g, std::size_t n, float lr,
                             float momentum, float grad_scale) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  v[i] = momentum * v[i] + grad_scale * g[i];
  p[i] -= lr * v[i];
}

__global__ void adam_kernel(float* p, float* m, float* v, const float* g, std::size_t n, float lr,
                     float grad_scale, float beta1, float beta2, float eps, float c1, float c2) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float gi = grad_scale * g[i];
  m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
  v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
  p[i] -= (lr / c1) * m[i] / (sqrtf(v[i] / c2) + eps);
}

}  // namespace

cudaError_t scale_bytes(const std::uint8_t* in, float* out, std::size_t n, cudaStream_t s) {
  scale_bytes_kernel<<<blocks(n), kThreads, 0, s>>>(in, out, n);
  return cudaGetLastError();
}

cudaError_t add_bias(float* out, const float* b, std::size_t rows, int cols, bool relu,
                     cudaStream_t s) {
  add_bias_kernel<<<blocks(rows * cols), kThreads, 0, s>>>(out, b, rows, cols, relu);
  return cudaGetLastError();
}

cudaError_t softmax_cross_entropy(const float* logits, const std::uint8_t* labels,
                                  std::size_t rows, int classes, float* dlogits,
                                  double* batch_loss, unsigned long long* correct,
                                  cudaStream_t s) {
  softmax_cross_entropy_kernel<<<blocks(rows), kThreads, 0, s>>>(logits, labels, rows, classes,
                                                                 dlogits, batch_loss, correct);
  return cudaGetLastError();
}

cudaError_t column_sums(const float* delta, std::size_t rows, int cols, float* db,
                        cudaStream_t s) {
  column_sums_kernel<<<blocks(cols), kThreads, 0, s>>>(delta, rows, cols, db);
  return cudaGetLastError();
}

cudaError_t relu_backward(float* delta, const float* act, std::size_t n, cudaStream_t s) {
  relu_backward_kernel<<<blocks(n), kThreads, 0, s>>>(delta, act, n);
  return cudaGetLastError();
}

cudaError_t finish_sums(double* batch_loss, double* epoch_loss, float* tail, cudaStream_t s) {
  finish_sums_kernel<<<1, 1, 0, s>>>(batch_loss, epoch_loss, tail);
  return cudaGetLastError();
}

cudaError_t sgd_momentum(float* p, float* v, const float* g, std::size_t n, float lr,
                         float momentum, float grad_scale, cudaStream_t s) {
  sgd_momentum_kernel<<<blocks(n), kThreads, 0, s>>>(p, v, g, n, lr, momentum, grad_scale);
  return cudaGetLastError();
}

cudaError_t adam(float* p, float* m, float* v, const float* g, std::size_t n, const AdamStep& a,
                 cudaStream_t s) {
  adam_kernel<<<blocks(n), kThreads, 0, s>>>(p, m, v, g, n, a.lr, a.grad_scale, a.beta1, a.beta2,
                                            a.eps, a.c1, a.c2);
  return cudaGetLastError();
}

}  // namespace fmnist::gpu
