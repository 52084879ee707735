// A multilayer perceptron (ReLU hidden layers, softmax cross-entropy output) whose parameters
// and gradient each live in one flat buffer, so that one all_reduce moves a whole gradient.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
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
  // give a zero gradient.
  BatchStats loss_and_gradient(const RowMatrix<Scalar>& x, std::span<const std::uint8_t> labels,
                               std::span<Scalar> grad);

  // The forward pass only.
  BatchStats evaluate(const RowMatrix<Scalar>& x, std::span<const std::uint8_t> labels);

 private:
  using Matrix = RowMatrix<Scalar>;
  using MatrixMap = Eigen::Map<Matrix>;
  using RowVectorMap = Eigen::Map<Eigen::Matrix<Scalar, 1, Eigen::Dynamic>>;

  int num_layers() const { return static_cast<int>(sizes_.size()) - 1; }
  MatrixMap weight(Scalar* base, int l) const;
  RowVectorMap bias(Scalar* base, int l) const;
  void forward(const Matrix& x);
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
