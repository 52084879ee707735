// See optimizer.h. Element-wise updates as Eigen array expressions, so they vectorize.
#include "optimizer.h"

#include <Eigen/Core>
#include <cmath>
#include <stdexcept>

namespace fmnist {

namespace {

Eigen::Map<Eigen::ArrayXf> array(std::span<float> s) {
  return {s.data(), static_cast<Eigen::Index>(s.size())};
}
Eigen::Map<const Eigen::ArrayXf> array(std::span<const float> s) {
  return {s.data(), static_cast<Eigen::Index>(s.size())};
}

}  // namespace

SgdMomentum::SgdMomentum(std::size_t n, float lr, float momentum)
    : Optimizer(lr), momentum_(momentum), velocity_(n, 0.0f) {}

void SgdMomentum::step(std::span<float> params, std::span<const float> grad, float grad_scale) {
  auto v = array(std::span<float>(velocity_));
  v = momentum_ * v + grad_scale * array(grad);
  array(params) -= lr_ * v;
}

Adam::Adam(std::size_t n, float lr, float beta1, float beta2, float eps)
    : Optimizer(lr), beta1_(beta1), beta2_(beta2), eps_(eps), m_(n, 0.0f), v_(n, 0.0f) {}

void Adam::step(std::span<float> params, std::span<const float> grad, float grad_scale) {
  ++t_;
  auto m = array(std::span<float>(m_));
  auto v = array(std::span<float>(v_));
  const auto grad_map = array(grad);
  const auto g = grad_scale * grad_map;
  m = beta1_ * m + (1.0f - beta1_) * g;
  v = beta2_ * v + (1.0f - beta2_) * g.square();
  const float c1 = 1.0f - std::pow(beta1_, static_cast<float>(t_));
  const float c2 = 1.0f - std::pow(beta2_, static_cast<float>(t_));
  array(params) -= (lr_ / c1) * m / ((v / c2).sqrt() + eps_);
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::size_t n, float lr,
                                          float momentum) {
  if (name == "sgd") return std::make_unique<SgdMomentum>(n, lr, momentum);
  if (name == "adam") return std::make_unique<Adam>(n, lr);
  throw std::invalid_argument("unknown optimizer '" + name + "'");
}

}  // namespace fmnist
