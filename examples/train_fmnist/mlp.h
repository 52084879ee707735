// A multilayer perceptron (ReLU hidden layers, softmax cross-entropy output) whose parameters
// and gradient each live in one flat buffer, so that one all_reduce moves a whole gradient.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "row_matrix.h"

namespace fmnist {

// Sums over a set of rows; they add up across batches and ranks.
struct BatchStats {
  double loss_sum = 0;       // cross-entropy summed over the rows
  std::int64_t correct = 0;  // rows whose highest logit is the label's
  std::int64_t count = 0;    // rows
};

// Calls into loss_and_gradient, for communication that overlaps the computation (train_fmnist
// --overlap); any may be empty.
struct LayerHooks {
  // Before layer l's forward reads its parameters (l = 0, 1, ...): the place to wait for them.
  std::function<void(int layer)> before_forward;
  // Once the forward has scored the rows, before backprop starts.
  std::function<void(const BatchStats& stats)> on_loss;
  // Once layer l's part of the gradient buffer is complete (the last layer first): backprop
  // neither reads nor writes that part again in this call.
  std::function<void(int layer)> on_layer_gradient;
};

// Layer l maps sizes[l] inputs to sizes[l+1] outputs: y = x W + b with W of shape
// sizes[l] x sizes[l+1] (row-major). Flat layout: W0, b0, W1, b1, ... in that order, the same
// for the parameters and the gradient.
template <class Scalar>
class Mlp {
 public:
  explicit Mlp(std::vector<int> sizes);

  const std::vector<int>& sizes() const { return sizes_; }
  std::size_t num_params() const { return params_.size(); }
  std::span<Scalar> params() { return params_; }
  std::span<const Scalar> params() const { return params_; }

  // He-normal weights (std dev sqrt(2 / fan_in)), zero biases.
  void init(std::uint64_t seed);

  // Writes into grad (num_params() elements) the gradient of the loss SUMMED over the rows of
  // x (one input per row, labels[i] the class of row i); returns the rows' stats. Zero rows
  // give a zero gradient. hooks are called for every layer, with zero rows too.
  BatchStats loss_and_gradient(const RowMatrix<Scalar>& x, std::span<const std::uint8_t> labels,
                               std::span<Scalar> grad, const LayerHooks& hooks = {});

  // The forward pass only.
  BatchStats evaluate(const RowMatrix<Scalar>& x, std::span<const std::uint8_t> labels);

  int num_layers() const { return static_cast<int>(sizes_.size()) - 1; }
  // Layer l's part (W_l then b_l) of a flat buffer of num_params() elements: the parameters or
  // a gradient.
  template <class T>
  std::span<T> layer_part(std::span<T> flat, int l) const {
    const std::size_t end =
        l + 1 < num_layers() ? offsets_[static_cast<std::size_t>(l) + 1] : params_.size();
    return flat.subspan(offsets_[static_cast<std::size_t>(l)],
                        end - offsets_[static_cast<std::size_t>(l)]);
  }

 private:
  using Matrix = RowMatrix<Scalar>;
  using MatrixMap = Eigen::Map<Matrix>;
  using RowVectorMap = Eigen::Map<Eigen::Matrix<Scalar, 1, Eigen::Dynamic>>;

  MatrixMap weight(Scalar* base, int l) const;
  RowVectorMap bias(Scalar* base, int l) const;
  // hooks: before_forward only.
  void forward(const Matrix& x, const LayerHooks& hooks = {});
  // Loss and accuracy from the logits; with dlogits, also d(summed loss)/d(logits).
  BatchStats score(std::span<const std::uint8_t> labels, Matrix* dlogits) const;

  std::vector<int> sizes_;
  std::vector<std::size_t> offsets_;  // offsets_[l]: start of W_l; b_l follows it
  std::vector<Scalar> params_;
  std::vector<Matrix> act_;  // act_[l]: output of layer l (after ReLU, except the logits)
  Matrix delta_, delta_prev_;
};

extern template class Mlp<float>;
extern template class Mlp<double>;

}  // namespace fmnist
