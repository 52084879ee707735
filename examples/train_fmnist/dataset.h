// Fashion-MNIST in memory, and the batch gather the trainer uses. The trainer sees only a
// DatasetView (pointers and sizes), so a node-shared store (synk's Data<T>) can replace the
// per-rank copy that load_fashion_mnist makes, without touching the training code.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dataset_view.h"
#include "row_matrix.h"

namespace fmnist {


struct Dataset {
  std::vector<std::uint8_t> pixels;
  std::vector<std::uint8_t> labels;
  std::size_t count = 0;
  std::size_t dim = 0;
  DatasetView view() const { return {pixels.data(), labels.data(), count, dim}; }
};

inline constexpr int kNumClasses = 10;

// Reads DIR/{split}-images-idx3-ubyte.gz and DIR/{split}-labels-idx1-ubyte.gz (or the same
// names without .gz when only those exist); split is "train" or "t10k". limit > 0 keeps the
// first limit images. Throws IdxError naming the file on any problem, label range included.
Dataset load_fashion_mnist(const std::string& dir, const std::string& split, std::size_t limit = 0);

// [lo, hi) of rank r among n for count rows: [r*count/n, (r+1)*count/n), as even as possible
// and in rank order (synk's Batch splitting will take this over).
struct Range {
  std::size_t lo = 0, hi = 0;
};
Range linspace_share(std::size_t count, int rank, int n);

// Copies the images at indices into the rows of x, scaled to [0, 1], and their labels into y.
void gather_rows(const DatasetView& data, std::span<const std::uint32_t> indices,
                 RowMatrix<float>& x, std::vector<std::uint8_t>& y);

}  // namespace fmnist
