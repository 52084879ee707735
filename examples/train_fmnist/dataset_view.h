// What the trainer reads of Fashion-MNIST: pointers and sizes, no Eigen (gpu_mlp.cu, built by
// nvcc, includes it too).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fmnist {

// Images as bytes (0..255), one row of dim pixels per image; labels 0..9.
struct DatasetView {
  const std::uint8_t* pixels = nullptr;
  const std::uint8_t* labels = nullptr;
  std::size_t count = 0;
  std::size_t dim = 0;
};

}  // namespace fmnist
