// train_fmnist --device cuda: the MLP of mlp.h with its forward, backward and update on a CUDA
// device (cuBLAS for the products, a few kernels of gpu_mlp.cu for the rest). The same flat
// layout (W0, b0, W1, b1, ...), the same loss (the summed softmax cross-entropy) and the same
// update rules as the CPU path, so that one epoch gives the same losses to rounding.
//
// No CUDA header here: trainer.cc includes it in every build. In a build without the CUDA
// compiler, the constructor throws (gpu_mlp_none.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataset_view.h"

namespace fmnist {

// This epoch's sums on this rank, read from the device at its end.
struct GpuEpochStats {
  double loss_sum = 0;
  std::int64_t correct = 0;
};

class GpuMlp {
 public:
  // On CUDA device `device`, for batches of up to max_rows rows; optimizer "sgd" (with this
  // momentum) or "adam", as make_optimizer takes them (the learning rate comes with each
  // update()). Throws std::runtime_error where CUDA fails (no device: the message says so) and
  // in a build without CUDA.
  GpuMlp(std::vector<int> sizes, int device, std::size_t max_rows, const std::string& optimizer,
         float momentum);
  ~GpuMlp();
  GpuMlp(const GpuMlp&) = delete;
  GpuMlp& operator=(const GpuMlp&) = delete;

  std::size_t num_params() const;
  void set_params(std::span<const float> host);
  void get_params(std::span<float> host) const;

  // Copies the rows `indices` of `data` (bytes 0..255, labels 0..9) to the device and scales
  // the pixels to [0, 1], as gather_rows does on the host.
  void load_batch(const DatasetView& data, std::span<const std::uint32_t> indices);
  // The loaded batch's summed-loss gradient into gradient(), followed by two floats: the batch's
  // loss sum and 1 if it is not finite (else 0), the layout of the CPU path's all_reduce. Adds
  // the loss and the correct count to the epoch's sums. Returns once the device is done.
  void loss_and_gradient();
  // num_params() + 2 floats on the device: the buffer a collective reduces in place.
  float* gradient();
  // The sums after the all_reduce: gradient()[num_params()] and the one after it.
  void read_sums(float& loss_sum, float& non_finite) const;
  // params -= rule(lr, grad_scale * gradient()), the rule of optimizer.h.
  void update(float lr, float grad_scale);

  GpuEpochStats take_epoch_stats();  // and zeroes them
  int device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fmnist
