// Data-parallel training of the MLP, SPMD: every rank draws the same global batches, computes
// the summed-loss gradient of its linspace share of the rows, and one all_reduce per step
// makes the global-batch mean on every rank, so every rank applies the same update. With
// overlap, the gradients travel layer by layer instead (overlap.h), to the same update.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataset.h"
#include "gpu_mlp.h"
#include "mlp.h"
#include "optimizer.h"
#include "overlap.h"
#include "synk/synk.h"

namespace fmnist {

struct TrainConfig {
  std::vector<int> layers{784, 256, 128, 10};
  std::size_t batch = 256;  // global batch, over all ranks
  std::string optimizer = "sgd";
  float lr = 0.1f;
  float momentum = 0.9f;
  // "cosine": lr * (1 + cos(pi * step / total_steps)) / 2, step by step over all the epochs;
  // "constant": lr throughout.
  std::string schedule = "cosine";
  int epochs = 1;  // the length of the cosine schedule
  std::uint64_t seed = 1;
  // Push each layer's gradient as backprop makes it (synk::KeyValue) instead of one
  // all_reduce after the backward pass.
  bool overlap = false;
  // "cpu", or "cuda": the model on this rank's CUDA device (gpu_mlp.h), its gradient
  // all-reduced by NCCL on device memory.
  std::string device = "cpu";
};

struct EpochRecord {
  int epoch = 0;
  double train_loss = 0;  // mean over the epoch's images, each at the parameters of its step
  double train_accuracy = 0;
  double test_accuracy = 0;
  double seconds = 0;       // the training steps of the epoch (rank 0's clock)
  double images_per_s = 0;  // training images of the epoch / seconds
};

// Thrown by run_epoch, on every rank alike, at the first step whose loss is NaN or infinite on
// some rank: training does not recover from it, and no rank may go on alone into a collective.
class NonFiniteLoss : public std::runtime_error {
 public:
  // step counts from 1; loss is the global batch's mean; lr the step's learning rate.
  NonFiniteLoss(int epoch, std::size_t step, std::size_t steps, double loss, float lr);
};

class Trainer {
 public:
  // Rank 0 initializes the parameters from seed and broadcasts them (once). The test set is
  // node-shared Data (pixels [count, dim], labels [count]) that a replicated Function reads.
  Trainer(synk::Communicator& comm, DatasetView train, const synk::Data<std::uint8_t>& test_pixels,
          const synk::Data<std::uint8_t>& test_labels, TrainConfig config);

  std::size_t steps_per_epoch() const;
  // Runs one epoch (epochs count from 1) and the test evaluation after it. progress(step,
  // steps) is called after every step. Throws NonFiniteLoss (see there).
  EpochRecord run_epoch(int epoch, const std::function<void(std::size_t, std::size_t)>& progress);
  // Accuracy over the whole test set: a synk::Function, each rank evaluating its share of the
  // rows in slices of about 1024, the (correct, count) sums collected once.
  double test_accuracy();
  std::span<const float> params() const { return model_.params(); }

 private:
  float scheduled_lr(int epoch, std::size_t step) const;
  // The step's gradient and one all_reduce of it with the sums; the update is the caller's.
  BatchStats all_reduce_step(StepSums& sums);
  // The same on the device: the rows staged, the gradient all-reduced through NCCL.
  void device_step(std::span<const std::uint32_t> rows, StepSums& sums);

  // --device cuda: a communicator on the nccl backend (device buffers) beside comm_, and the
  // model on its device.
  struct DevicePath {
    DevicePath(synk::Communicator& comm, const TrainConfig& c, std::size_t max_rows)
        : nccl(comm.mpi_comm(), synk::CommOptions{"nccl"}),
          model(make_gpu_mlp({c.layers, nccl.device(), max_rows, c.optimizer, c.momentum})) {}
    synk::Communicator nccl;
    std::unique_ptr<GpuMlp> model;
  };

  synk::Communicator& comm_;
  DatasetView train_;
  const synk::Data<std::uint8_t>& test_pixels_;
  const synk::Data<std::uint8_t>& test_labels_;
  synk::Function<std::uint8_t, double> evaluate_;
  TrainConfig config_;
  Mlp<float> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LayerExchange> overlap_;  // set with config.overlap
  std::unique_ptr<DevicePath> device_;      // set with config.device "cuda"
  std::vector<std::uint32_t> order_;
  // The flat gradient, one Shared buffer on every rank, and after it two floats that ride the
  // same all_reduce: the step's loss sum and the count of ranks whose loss is not finite.
  synk::Shared<float> grad_;
  RowMatrix<float> x_;
  std::vector<std::uint8_t> y_;
};

}  // namespace fmnist
