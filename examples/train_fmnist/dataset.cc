// See dataset.h.
#include "dataset.h"

#include <sys/stat.h>

#include "idx_reader.h"

namespace fmnist {

namespace {

// The compressed file when present, else the plain one; the .gz name (for the error) if neither.
std::string pick(const std::string& dir, const std::string& name) {
  const std::string gz = dir + "/" + name + ".gz";
  struct stat st {};
  if (stat(gz.c_str(), &st) == 0) return gz;
  const std::string plain = dir + "/" + name;
  if (stat(plain.c_str(), &st) == 0) return plain;
  return gz;
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, const std::string& split, std::size_t limit) {
  const std::string image_path = pick(dir, split + "-images-idx3-ubyte");
  const std::string label_path = pick(dir, split + "-labels-idx1-ubyte");
  IdxArray images = read_idx(image_path, 3, limit);
  IdxArray labels = read_idx(label_path, 1, limit);
  if (images.dims[0] != labels.dims[0]) {
    throw IdxError(label_path + ": " + std::to_string(labels.dims[0]) + " labels for " +
                   std::to_string(images.dims[0]) + " images in " + image_path);
  }
  for (std::size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kNumClasses) {
      throw IdxError(label_path + ": label " + std::to_string(labels.data[i]) + " at index " +
                     std::to_string(i) + " is not a class 0..9");
    }
  }
  Dataset out;
  out.count = images.dims[0];
  out.dim = std::size_t{images.dims[1]} * images.dims[2];
  out.pixels = std::move(images.data);
  out.labels = std::move(labels.data);
  return out;
}

Range linspace_share(std::size_t count, int rank, int n) {
  const auto r = static_cast<std::size_t>(rank);
  const auto size = static_cast<std::size_t>(n);
  return {r * count / size, (r + 1) * count / size};
}

void gather_rows(const DatasetView& data, std::span<const std::uint32_t> indices,
                 RowMatrix<float>& x, std::vector<std::uint8_t>& y) {
  const auto rows = static_cast<Eigen::Index>(indices.size());
  const auto cols = static_cast<Eigen::Index>(data.dim);
  x.resize(rows, cols);
  y.resize(indices.size());
  for (Eigen::Index r = 0; r < rows; ++r) {
    const std::size_t i = indices[static_cast<std::size_t>(r)];
    const Eigen::Map<const Eigen::Matrix<std::uint8_t, 1, Eigen::Dynamic>> src(
        data.pixels + i * data.dim, cols);
    x.row(r) = src.cast<float>() * (1.0f / 255.0f);
    y[static_cast<std::size_t>(r)] = data.labels[i];
  }
}

}  // namespace fmnist
