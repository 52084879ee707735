// gpu_mlp.h in a build without the CUDA compiler or NCCL: --device cuda says so.
#include <stdexcept>

#include "gpu_mlp.h"

namespace fmnist {

struct GpuMlp::Impl {};

GpuMlp::GpuMlp(std::vector<int>, int, std::size_t, const std::string&, float) {
  throw std::runtime_error(
      "--device cuda: this build has no CUDA path (configure found no CUDA compiler, or synk "
      "was built without NCCL)");
}
GpuMlp::~GpuMlp() = default;
std::size_t GpuMlp::num_params() const { return 0; }
void GpuMlp::set_params(std::span<const float>) {}
void GpuMlp::get_params(std::span<float>) const {}
void GpuMlp::load_batch(const DatasetView&, std::span<const std::uint32_t>) {}
void GpuMlp::loss_and_gradient() {}
float* GpuMlp::gradient() { return nullptr; }
void GpuMlp::read_sums(float&, float&) const {}
void GpuMlp::update(float, float) {}
GpuEpochStats GpuMlp::take_epoch_stats() { return {}; }
int GpuMlp::device() const { return -1; }

}  // namespace fmnist
