// The update rules, on the flat parameter and gradient buffers: SGD with momentum and Adam.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace fmnist {

class Optimizer {
 public:
  explicit Optimizer(float lr) : lr_(lr) {}
  virtual ~Optimizer() = default;
  float lr() const { return lr_; }
  void set_lr(float lr) { lr_ = lr; }  // for a schedule
  // One update from the gradient g = grad_scale * grad (the scale is folded into the update,
  // which saves a pass over the buffer: grad may be a sum and grad_scale 1 / batch).
  virtual void step(std::span<float> params, std::span<const float> grad, float grad_scale) = 0;

 protected:
  float lr_;
};

// v = momentum * v + grad; params -= lr * v (PyTorch's formulation).
class SgdMomentum final : public Optimizer {
 public:
  SgdMomentum(std::size_t n, float lr, float momentum);
  void step(std::span<float> params, std::span<const float> grad, float grad_scale) override;

 private:
  float momentum_;
  std::vector<float> velocity_;
};

// Kingma & Ba, with bias correction.
class Adam final : public Optimizer {
 public:
  Adam(std::size_t n, float lr, float beta1 = 0.9f, float beta2 = 0.999f, float eps = 1e-8f);
  void step(std::span<float> params, std::span<const float> grad, float grad_scale) override;

 private:
  float beta1_, beta2_, eps_;
  std::int64_t t_ = 0;
  std::vector<float> m_, v_;
};

// name is "sgd" or "adam".
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::size_t n, float lr,
                                          float momentum);

}  // namespace fmnist
