// train_fmnist --device cuda: the MLP of mlp.h with its forward, backward and update on a CUDA
// device (cuBLAS for the products, a few kernels of gpu_mlp.cu for the rest). The same flat
// layout (W0, b0, W1, b1, ...), the same loss (the summed softmax cross-entropy) and the same
// update rules as the CPU path, so that one epoch gives the same losses to rounding.
//
// No CUDA header here: trainer.cc includes it in every build. The CUDA model lives in a module
// of its own (libfmnist_gpu.so, gpu_mlp.cc and gpu_kernels.cu), loaded by make_gpu_mlp on the
// first --device cuda: cuBLAS loads the driver (libcuda) when it is loaded, and a CPU run must
// not (tests/nccl/no_libcuda.sh).
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

// The model on the device. Its one implementation is the module's.
class GpuMlp {
 public:
  virtual ~GpuMlp() = default;

  virtual std::size_t num_params() const = 0;
  virtual void set_params(std::span<const float> host) = 0;
  virtual void get_params(std::span<float> host) const = 0;

  // Copies the rows `indices` of `data` (bytes 0..255, labels 0..9) to the device and scales
  // the pixels to [0, 1], as gather_rows does on the host.
  virtual void load_batch(const DatasetView& data, std::span<const std::uint32_t> indices) = 0;
  // The loaded batch's summed-loss gradient into gradient(), followed by two floats: the batch's
  // loss sum and 1 if it is not finite (else 0), the layout of the CPU path's all_reduce. Adds
  // the loss and the correct count to the epoch's sums. Returns once the device is done.
  virtual void loss_and_gradient() = 0;
  // num_params() + 2 floats on the device: the buffer a collective reduces in place.
  virtual float* gradient() = 0;
  // The sums after the all_reduce: gradient()[num_params()] and the one after it.
  virtual void read_sums(float& loss_sum, float& non_finite) const = 0;
  // params -= rule(lr, grad_scale * gradient()), the rule of optimizer.h.
  virtual void update(float lr, float grad_scale) = 0;

  virtual GpuEpochStats take_epoch_stats() = 0;  // and zeroes them
  virtual int device() const = 0;
};

// What the module's model is made with: on CUDA device `device`, for batches of up to max_rows
// rows; optimizer "sgd" (with this momentum) or "adam", as make_optimizer takes them (the
// learning rate comes with each update()).
struct GpuMlpConfig {
  std::vector<int> sizes;
  int device = 0;
  std::size_t max_rows = 0;
  std::string optimizer;
  float momentum = 0;
};

// The model from libfmnist_gpu.so, which sits in ../lib beside this program's bin (the build
// tree's layout). Throws std::runtime_error where the module is missing (a build without the
// CUDA compiler or NCCL: the message says so), cannot be loaded, or CUDA fails (no device: the
// message says so).
std::unique_ptr<GpuMlp> make_gpu_mlp(const GpuMlpConfig& config);

// The module's one export, by this name: a new model, which the caller owns.
extern "C" GpuMlp* fmnist_make_cuda_mlp(const GpuMlpConfig& config);

}  // namespace fmnist
