// See mlp.h. The batch is row-major (one example per row); every product is one Eigen GEMM.
#include "mlp.h"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace fmnist {

template <class Scalar>
Mlp<Scalar>::Mlp(std::vector<int> sizes) : sizes_(std::move(sizes)) {
  if (sizes_.size() < 2)
    throw std::invalid_argument("Mlp: needs at least an input and an output size");
  std::size_t total = 0;
  for (int l = 0; l < num_layers(); ++l) {
    if (sizes_[l] <= 0 || sizes_[l + 1] <= 0)
      throw std::invalid_argument("Mlp: layer sizes must be positive");
    offsets_.push_back(total);
    total += static_cast<std::size_t>(sizes_[l]) * static_cast<std::size_t>(sizes_[l + 1]) +
             static_cast<std::size_t>(sizes_[l + 1]);
  }
  params_.assign(total, Scalar(0));
  act_.resize(static_cast<std::size_t>(num_layers()));
}

template <class Scalar>
typename Mlp<Scalar>::MatrixMap Mlp<Scalar>::weight(Scalar* base, int l) const {
  return MatrixMap(base + offsets_[static_cast<std::size_t>(l)], sizes_[l], sizes_[l + 1]);
}

template <class Scalar>
typename Mlp<Scalar>::RowVectorMap Mlp<Scalar>::bias(Scalar* base, int l) const {
  const std::size_t at =
      offsets_[static_cast<std::size_t>(l)] +
      static_cast<std::size_t>(sizes_[l]) * static_cast<std::size_t>(sizes_[l + 1]);
  return RowVectorMap(base + at, sizes_[l + 1]);
}

template <class Scalar>
void Mlp<Scalar>::init(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int l = 0; l < num_layers(); ++l) {
    std::normal_distribution<double> normal(0.0, std::sqrt(2.0 / sizes_[l]));
    auto w = weight(params_.data(), l);
    for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = static_cast<Scalar>(normal(rng));
    bias(params_.data(), l).setZero();
  }
}

template <class Scalar>
void Mlp<Scalar>::forward(const Matrix& x, const LayerHooks& hooks) {
  if (x.cols() != sizes_[0]) {
    throw std::invalid_argument("Mlp: input has " + std::to_string(x.cols()) +
                                " columns, expected " + std::to_string(sizes_[0]));
  }
  const Matrix* in = &x;
  for (int l = 0; l < num_layers(); ++l) {
    if (hooks.before_forward) hooks.before_forward(l);
    Matrix& out = act_[static_cast<std::size_t>(l)];
    out.noalias() = *in * weight(params_.data(), l);
    out.rowwise() += bias(params_.data(), l);
    if (l + 1 < num_layers()) out = out.cwiseMax(Scalar(0));
    in = &out;
  }
}

template <class Scalar>
BatchStats Mlp<Scalar>::score(std::span<const std::uint8_t> labels, Matrix* dlogits) const {
  const Matrix& logits = act_.back();
  BatchStats stats;
  stats.count = logits.rows();
  if (dlogits) dlogits->resize(logits.rows(), logits.cols());
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    const auto row = logits.row(r);
    Eigen::Index best = 0;
    const Scalar max = row.maxCoeff(&best);
    const Scalar sum = (row.array() - max).exp().sum();
    const int label = labels[static_cast<std::size_t>(r)];
    // -log softmax(row)[label], computed stably.
    stats.loss_sum += static_cast<double>(std::log(sum) - (row(label) - max));
    if (best == label) ++stats.correct;
    if (dlogits) {
      dlogits->row(r) = (row.array() - max).exp() / sum;
      (*dlogits)(r, label) -= Scalar(1);
    }
  }
  return stats;
}

template <class Scalar>
BatchStats Mlp<Scalar>::loss_and_gradient(const Matrix& x, std::span<const std::uint8_t> labels,
                                          std::span<Scalar> grad, const LayerHooks& hooks) {
  if (grad.size() != params_.size())
    throw std::invalid_argument("Mlp: gradient buffer has the wrong size");
  if (static_cast<std::size_t>(x.rows()) != labels.size())
    throw std::invalid_argument("Mlp: rows and labels differ");
  if (x.rows() == 0) {  // the hooks see every layer all the same
    for (int l = 0; l < num_layers(); ++l)
      if (hooks.before_forward) hooks.before_forward(l);
    if (hooks.on_loss) hooks.on_loss({});
    std::fill(grad.begin(), grad.end(), Scalar(0));
    for (int l = num_layers() - 1; l >= 0; --l)
      if (hooks.on_layer_gradient) hooks.on_layer_gradient(l);
    return {};
  }
  forward(x, hooks);
  const BatchStats stats = score(labels, &delta_);
  if (hooks.on_loss) hooks.on_loss(stats);
  for (int l = num_layers() - 1; l >= 0; --l) {
    const Matrix& in = l == 0 ? x : act_[static_cast<std::size_t>(l - 1)];
    weight(grad.data(), l).noalias() = in.transpose() * delta_;
    bias(grad.data(), l) = delta_.colwise().sum();
    if (hooks.on_layer_gradient) hooks.on_layer_gradient(l);
    if (l == 0) break;
    delta_prev_.noalias() = delta_ * weight(params_.data(), l).transpose();
    // ReLU': the stored activation is positive exactly where its input was.
    delta_prev_.array() *= (in.array() > Scalar(0)).template cast<Scalar>();
    delta_.swap(delta_prev_);
  }
  return stats;
}

template <class Scalar>
BatchStats Mlp<Scalar>::evaluate(const Matrix& x, std::span<const std::uint8_t> labels) {
  if (static_cast<std::size_t>(x.rows()) != labels.size())
    throw std::invalid_argument("Mlp: rows and labels differ");
  if (x.rows() == 0) return {};
  forward(x);
  return score(labels, nullptr);
}

template class Mlp<float>;
template class Mlp<double>;

}  // namespace fmnist
