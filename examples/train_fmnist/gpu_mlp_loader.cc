// See gpu_mlp.h: the CUDA model's module, loaded on the first --device cuda and kept loaded.
#include <dlfcn.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include "gpu_mlp.h"

namespace fmnist {

namespace {

constexpr const char* kModuleName = "libfmnist_gpu.so";

// bin/train_fmnist -> lib/libfmnist_gpu.so, as the build tree lays them out.
std::filesystem::path module_path() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return kModuleName;  // then the loader's own search
  return exe.parent_path().parent_path() / "lib" / kModuleName;
}

using MakeFn = GpuMlp* (*)(const GpuMlpConfig&);

MakeFn load_module() {
  if (!FMNIST_CUDA_MODULE) {
    throw std::runtime_error(
        "--device cuda: this build has no CUDA path (configure found no CUDA compiler, or synk "
        "was built without NCCL)");
  }
  const std::filesystem::path path = module_path();
  if (path.is_absolute() && !std::filesystem::exists(path)) {
    throw std::runtime_error("--device cuda: the CUDA model's module is not at " + path.string() +
                             " (train_fmnist runs from the build tree's bin/, beside its lib/)");
  }
  // RTLD_LOCAL: cuBLAS and the kernels stay the module's; it is never closed, since CUDA's
  // teardown at exit would run after its code was gone.
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!module) {
    throw std::runtime_error("--device cuda: cannot load " + path.string() + ": " + dlerror());
  }
  void* make = dlsym(module, "fmnist_make_cuda_mlp");
  if (!make) {
    throw std::runtime_error("--device cuda: " + path.string() + " has no fmnist_make_cuda_mlp");
  }
  return reinterpret_cast<MakeFn>(make);
}

}  // namespace

std::unique_ptr<GpuMlp> make_gpu_mlp(const GpuMlpConfig& config) {
  static const MakeFn make = load_module();
  return std::unique_ptr<GpuMlp>(make(config));
}

}  // namespace fmnist
