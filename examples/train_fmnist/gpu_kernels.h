// The kernels of train_fmnist --device cuda (gpu_kernels.cu, built by nvcc as C++17): each
// queues its work on stream `s` and returns the launch's error (cudaGetLastError).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace fmnist::gpu {

// out = in / 255 (pixels to [0, 1], as gather_rows does).
cudaError_t scale_bytes(const std::uint8_t* in, float* out, std::size_t n, cudaStream_t s);
// out[r][c] += b[c], then ReLU where relu.
cudaError_t add_bias(float* out, const float* b, std::size_t rows, int cols, bool relu,
                     cudaStream_t s);
// Per row: -log softmax(row)[label] added to *batch_loss, dlogits = softmax - onehot, and
// *correct += 1 where the first largest logit is the label.
cudaError_t softmax_cross_entropy(const float* logits, const std::uint8_t* labels,
                                  std::size_t rows, int classes, float* dlogits,
                                  double* batch_loss, unsigned long long* correct, cudaStream_t s);
// db[c] = the sum over rows of delta[r][c].
cudaError_t column_sums(const float* delta, std::size_t rows, int cols, float* db,
                        cudaStream_t s);
// delta = 0 where act <= 0 (ReLU').
cudaError_t relu_backward(float* delta, const float* act, std::size_t n, cudaStream_t s);
// tail[0] = *batch_loss, tail[1] = 1 if it is not finite, else 0; *epoch_loss += *batch_loss,
// *batch_loss = 0.
cudaError_t finish_sums(double* batch_loss, double* epoch_loss, float* tail, cudaStream_t s);
// optimizer.h's rules: v = momentum v + grad_scale g, p -= lr v; and Adam's.
cudaError_t sgd_momentum(float* p, float* v, const float* g, std::size_t n, float lr,
                         float momentum, float grad_scale, cudaStream_t s);
struct AdamStep {
  float lr, grad_scale, beta1, beta2, eps, c1, c2;  // c1, c2: the bias corrections
};
cudaError_t adam(float* p, float* m, float* v, const float* g, std::size_t n, const AdamStep& a,
                 cudaStream_t s);

}  // namespace fmnist::gpu
