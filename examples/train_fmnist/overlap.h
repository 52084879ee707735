// train_fmnist --overlap: the gradient exchange of a step, layer by layer through a
// synk::KeyValue (mshadow-ps's pattern). Backprop pushes each layer's gradient as soon as it is
// complete and pulls the sum over the ranks back into the same buffer; the update it brings is
// applied just before that layer's next forward. So one layer's communication hides behind the
// backprop of the layers below it and the forward of the layers above it, instead of one
// all_reduce after the whole backward pass.
//
// The update is the one of the all_reduce path: the same global-batch mean, the same optimizer
// rule (one optimizer per layer, each the same element-wise rule on its part), applied before
// the same forward; and none at all after a step whose loss is not finite on some rank.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mlp.h"
#include "optimizer.h"
#include "synk/communicator.h"
#include "synk/key_value.h"

namespace fmnist {

// The step's sums over the ranks that decide whether training goes on.
struct StepSums {
  float loss_sum = 0;    // the global batch's summed loss
  float non_finite = 0;  // ranks whose loss is NaN or infinite (0s and 1s: exact in any order)
};

// What a step's reduced gradient becomes: params -= rule(lr, grad_scale * gradient sum).
struct StepUpdate {
  float lr = 0;
  float grad_scale = 0;  // 1 / the global batch
};

class LayerExchange {
 public:
  // Collective over comm: one key per layer (W_l and b_l, contiguous in the flat layout) and
  // one for the StepSums. optimizer, lr and momentum as make_optimizer takes them.
  LayerExchange(synk::Communicator& comm, Mlp<float>& model, const std::string& optimizer, float lr,
                float momentum);

  // One step on this rank's rows: applies the previous step's update to each layer before its
  // forward, pushes the loss and each layer's gradient as backprop makes them, and waits for
  // the sums. Returns this rank's stats; `sums` gets the ranks' sums. When sums.non_finite > 0
  // the caller must stop: the step's update is never applied.
  BatchStats step(const RowMatrix<float>& x, std::span<const std::uint8_t> labels,
                  StepUpdate update, StepSums& sums);
  // Applies the last step's update to every layer (at the end of an epoch, before the
  // parameters are read).
  void finish();

 private:
  int sums_key() const { return model_.num_layers(); }
  // Higher first: the sums (the step ends on them), then layer 0 (the next forward needs it
  // first), 1, ...
  int sums_priority() const { return model_.num_layers() + 1; }
  int priority(int layer) const { return model_.num_layers() - layer; }
  void push_sums(const BatchStats& local);
  void push_layer(int layer);
  void apply_layer(int layer);  // waits for the layer's pull, then updates its parameters

  Mlp<float>& model_;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;  // one per layer
  std::vector<float> grad_;  // the flat gradient; a layer's part is synk's from push to pull_wait
  std::array<float, 2> sums_{};
  std::vector<bool> pending_;  // per layer: a pulled gradient not yet applied
  StepUpdate update_;          // the rule for the pending gradients
  // Last, so that it closes first: after a stop (a loss that is not finite) the pulls still
  // open write into grad_ and sums_ until it has closed.
  synk::KeyValue kv_;
};

}  // namespace fmnist
