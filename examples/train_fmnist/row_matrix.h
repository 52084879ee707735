// The matrix type of the example: a batch is row-major, one example per row.
#pragma once

#include <Eigen/Core>

namespace fmnist {

template <class Scalar>
using RowMatrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

}  // namespace fmnist
