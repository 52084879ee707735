// See overlap.h.
#include "overlap.h"

#include <cmath>

namespace fmnist {

LayerExchange::LayerExchange(synk::Communicator& comm, Mlp<float>& model,
                             const std::string& optimizer, float lr, float momentum)
    : model_(model),
      grad_(model.num_params()),
      pending_(static_cast<std::size_t>(model.num_layers()), false),
      kv_(comm) {
  for (int l = 0; l < model_.num_layers(); ++l) {
    const std::size_t count = model_.layer_part(std::span<float>(grad_), l).size();
    kv_.init_key(l, count, synk::DataType::float32);
    optimizers_.push_back(make_optimizer(optimizer, count, lr, momentum));
  }
  kv_.init_key(sums_key(), sums_.size(), synk::DataType::float32);
}

BatchStats LayerExchange::step(const RowMatrix<float>& x, std::span<const std::uint8_t> labels,
                               StepUpdate update, StepSums& sums) {
  LayerHooks hooks;
  hooks.before_forward = [this](int l) { apply_layer(l); };
  hooks.on_loss = [this](const BatchStats& s) { push_sums(s); };  // reduced during backprop
  hooks.on_layer_gradient = [this](int l) { push_layer(l); };
  const BatchStats local = model_.loss_and_gradient(x, labels, grad_, hooks);
  update_ = update;  // for the gradients just pushed, applied in the next step's forward
  kv_.pull_wait(sums_key());
  sums = {sums_[0], sums_[1]};
  return local;
}

void LayerExchange::finish() {
  for (int l = 0; l < model_.num_layers(); ++l) apply_layer(l);
}

void LayerExchange::push_sums(const BatchStats& local) {
  sums_[0] = static_cast<float>(local.loss_sum);
  sums_[1] = std::isfinite(sums_[0]) ? 0.0f : 1.0f;
  kv_.push(sums_key(), sums_.data(), sums_priority());
  kv_.pull(sums_key(), sums_.data(), sums_priority());
}

void LayerExchange::push_layer(int layer) {
  float* part = model_.layer_part(std::span<float>(grad_), layer).data();
  kv_.push(layer, part, priority(layer));
  kv_.pull(layer, part, priority(layer));  // the sum comes back into the pushed buffer
  pending_[static_cast<std::size_t>(layer)] = true;
}

void LayerExchange::apply_layer(int layer) {
  if (!pending_[static_cast<std::size_t>(layer)]) return;
  kv_.pull_wait(layer);
  pending_[static_cast<std::size_t>(layer)] = false;
  Optimizer& opt = *optimizers_[static_cast<std::size_t>(layer)];
  opt.set_lr(update_.lr);
  opt.step(model_.layer_part(model_.params(), layer),
           model_.layer_part(std::span<const float>(grad_), layer), update_.grad_scale);
}

}  // namespace fmnist
