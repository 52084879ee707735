// See gpu_mlp.h. Row-major matrices, as on the CPU: cuBLAS, which is column-major, sees each as
// its transpose, so every product below is written for the transposes (comments give the
// row-major meaning). Batches come from the node-shared Data through synk's DeviceStager; the
// element-wise work is gpu_kernels.cu's.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "gpu_kernels.h"
#include "gpu_mlp.h"
#include "synk/device.h"

namespace fmnist {

namespace {

void check(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) {
    throw std::runtime_error(std::string("--device cuda: ") + call + ": " +
                             cudaGetErrorString(rc));
  }
}
void check(cublasStatus_t rc, const char* call) {
  if (rc != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("--device cuda: ") + call + ": " +
                             cublasGetStatusString(rc));
  }
}
#define CHECK(expr) check((expr), #expr)

// Device memory for n elements of T, freed with it.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t n) : n_(n) {
    void* p = nullptr;
    if (n) CHECK(cudaMalloc(&p, n * sizeof(T)));
    p_ = static_cast<T*>(p);
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// gpu_mlp.h's model on a CUDA device.
class CudaMlp final : public GpuMlp {
 public:
  explicit CudaMlp(const GpuMlpConfig& config);
  ~CudaMlp() override;
  std::size_t num_params() const override;
  void set_params(std::span<const float> host) override;
  void get_params(std::span<float> host) const override;
  void load_batch(const DatasetView& data, std::span<const std::uint32_t> indices) override;
  void loss_and_gradient() override;
  float* gradient() override;
  void read_sums(float& loss_sum, float& non_finite) const override;
  void update(float lr, float grad_scale) override;
  GpuEpochStats take_epoch_stats() override;
  int device() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace

struct CudaMlp::Impl {
  std::vector<int> sizes;
  std::vector<std::size_t> offsets;  // of W_l in the flat layout; b_l follows it
  std::size_t n = 0;                 // parameters
  std::size_t max_rows = 0;
  std::size_t rows = 0;  // of the loaded batch
  int device = 0;
  std::string optimizer;
  float momentum = 0;
  std::int64_t adam_t = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  synk::DeviceStager stager;
  DeviceArray<float> params, grad, state1, state2, x, delta, delta_prev;
  std::vector<DeviceArray<float>> act;  // layer l's output, max_rows x sizes[l + 1]
  DeviceArray<std::uint8_t> x_bytes, labels;
  DeviceArray<double> loss;                    // [0] the batch's, [1] the epoch's
  DeviceArray<unsigned long long> correct;     // the epoch's

  Impl(int dev) : device(dev), stager(dev) {}
  ~Impl() {
    if (blas) cublasDestroy(blas);
    if (stream) cudaStreamDestroy(stream);
  }
  int layers() const { return static_cast<int>(sizes.size()) - 1; }
  float* w(float* base, int l) const { return base + offsets[static_cast<std::size_t>(l)]; }
  float* b(float* base, int l) const {
    return w(base, l) + static_cast<std::size_t>(sizes[l]) * sizes[l + 1];
  }
  void forward(const float* in);
  void backward();
};

CudaMlp::CudaMlp(const GpuMlpConfig& config) {
  CHECK(cudaSetDevice(config.device));
  impl_ = std::make_unique<Impl>(config.device);
  Impl& m = *impl_;
  m.sizes = config.sizes;
  m.max_rows = config.max_rows;
  m.optimizer = config.optimizer;
  m.momentum = config.momentum;
  const std::size_t max_rows = config.max_rows;
  int widest = 0;
  for (int l = 0; l < m.layers(); ++l) {
    m.offsets.push_back(m.n);
    m.n += static_cast<std::size_t>(m.sizes[l]) * m.sizes[l + 1] + m.sizes[l + 1];
    m.act.emplace_back(max_rows * static_cast<std::size_t>(m.sizes[l + 1]));
    widest = std::max(widest, m.sizes[l + 1]);
  }
  m.params = DeviceArray<float>(m.n);
  m.grad = DeviceArray<float>(m.n + 2);
  m.state1 = DeviceArray<float>(m.n);
  if (m.optimizer == "adam") m.state2 = DeviceArray<float>(m.n);
  CHECK(cudaMemset(m.state1.get(), 0, m.n * sizeof(float)));
  if (m.state2.size()) CHECK(cudaMemset(m.state2.get(), 0, m.n * sizeof(float)));
  m.x = DeviceArray<float>(max_rows * static_cast<std::size_t>(m.sizes[0]));
  m.x_bytes = DeviceArray<std::uint8_t>(max_rows * static_cast<std::size_t>(m.sizes[0]));
  m.labels = DeviceArray<std::uint8_t>(max_rows);
  m.delta = DeviceArray<float>(max_rows * static_cast<std::size_t>(widest));
  m.delta_prev = DeviceArray<float>(max_rows * static_cast<std::size_t>(widest));
  m.loss = DeviceArray<double>(2);
  m.correct = DeviceArray<unsigned long long>(1);
  CHECK(cudaMemset(m.loss.get(), 0, 2 * sizeof(double)));
  CHECK(cudaMemset(m.correct.get(), 0, sizeof(unsigned long long)));
  CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  CHECK(cublasCreate(&m.blas));
  CHECK(cublasSetStream(m.blas, m.stream));
  // FP32 products, not TF32: the CPU run's losses must be matched to 1e-3.
  CHECK(cublasSetMathMode(m.blas, CUBLAS_DEFAULT_MATH));
}

CudaMlp::~CudaMlp() = default;

std::size_t CudaMlp::num_params() const { return impl_->n; }
int CudaMlp::device() const { return impl_->device; }
float* CudaMlp::gradient() { return impl_->grad.get(); }

void CudaMlp::set_params(std::span<const float> host) {
  if (host.size() != impl_->n) throw std::invalid_argument("GpuMlp: wrong parameter count");
  CHECK(cudaMemcpy(impl_->params.get(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
}

void CudaMlp::get_params(std::span<float> host) const {
  if (host.size() != impl_->n) throw std::invalid_argument("GpuMlp: wrong parameter count");
  CHECK(cudaMemcpy(host.data(), impl_->params.get(), host.size_bytes(), cudaMemcpyDeviceToHost));
}

void CudaMlp::load_batch(const DatasetView& data, std::span<const std::uint32_t> indices) {
  Impl& m = *impl_;
  if (indices.size() > m.max_rows) throw std::invalid_argument("GpuMlp: batch too large");
  m.rows = indices.size();
  if (m.rows == 0) return;
  synk::RowSelection sel;
  sel.indices.assign(indices.begin(), indices.end());
  m.stager.stage(data.pixels, data.count, data.dim, sel, m.x_bytes.get(), m.stream);
  m.stager.stage(data.labels, data.count, 1, sel, m.labels.get(), m.stream);
  const std::size_t cells = m.rows * data.dim;
  CHECK(gpu::scale_bytes(m.x_bytes.get(), m.x.get(), cells, m.stream));
}

void CudaMlp::Impl::forward(const float* in) {
  const float one = 1.0f, zero = 0.0f;
  const int r = static_cast<int>(rows);
  for (int l = 0; l < layers(); ++l) {
    const int i = sizes[l], o = sizes[l + 1];
    float* out = act[static_cast<std::size_t>(l)].get();
    // out (rows x o) = in (rows x i) W (i x o)
    CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, o, r, i, &one, w(params.get(), l), o, in, i,
                      &zero, out, o));
    CHECK(gpu::add_bias(out, b(params.get(), l), rows, o, l + 1 < layers(), stream));
    in = out;
  }
}

void CudaMlp::Impl::backward() {
  const float one = 1.0f, zero = 0.0f;
  const int r = static_cast<int>(rows);
  for (int l = layers() - 1; l >= 0; --l) {
    const int i = sizes[l], o = sizes[l + 1];
    const float* in = l == 0 ? x.get() : act[static_cast<std::size_t>(l - 1)].get();
    // dW (i x o) = in^T (i x rows) delta (rows x o)
    CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, o, i, r, &one, delta.get(), o, in, i, &zero,
                      w(grad.get(), l), o));
    CHECK(gpu::column_sums(delta.get(), rows, o, b(grad.get(), l), stream));
    if (l == 0) break;
    // delta_prev (rows x i) = delta (rows x o) W^T (o x i), then ReLU'
    CHECK(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, i, r, o, &one, w(params.get(), l), o,
                      delta.get(), o, &zero, delta_prev.get(), i));
    CHECK(gpu::relu_backward(delta_prev.get(), in, rows * i, stream));
    std::swap(delta, delta_prev);
  }
}

void CudaMlp::loss_and_gradient() {
  Impl& m = *impl_;
  if (m.rows == 0) {  // this rank's share of a short last batch: nothing, but the collective
    CHECK(cudaMemsetAsync(m.grad.get(), 0, (m.n + 2) * sizeof(float), m.stream));
  } else {
    m.forward(m.x.get());
    const int classes = m.sizes.back();
    CHECK(gpu::softmax_cross_entropy(m.act.back().get(), m.labels.get(), m.rows, classes,
                                     m.delta.get(), m.loss.get(), m.correct.get(), m.stream));
    m.backward();
    CHECK(gpu::finish_sums(m.loss.get(), m.loss.get() + 1, m.grad.get() + m.n, m.stream));
  }
  CHECK(cudaStreamSynchronize(m.stream));
}

void CudaMlp::read_sums(float& loss_sum, float& non_finite) const {
  float tail[2];
  CHECK(cudaMemcpy(tail, impl_->grad.get() + impl_->n, sizeof tail, cudaMemcpyDeviceToHost));
  loss_sum = tail[0];
  non_finite = tail[1];
}

void CudaMlp::update(float lr, float grad_scale) {
  Impl& m = *impl_;
  if (m.optimizer == "adam") {
    ++m.adam_t;
    const float beta1 = 0.9f, beta2 = 0.999f;
    const float c1 = 1.0f - std::pow(beta1, static_cast<float>(m.adam_t));
    const float c2 = 1.0f - std::pow(beta2, static_cast<float>(m.adam_t));
    const gpu::AdamStep step{lr, grad_scale, beta1, beta2, 1e-8f, c1, c2};
    CHECK(gpu::adam(m.params.get(), m.state1.get(), m.state2.get(), m.grad.get(), m.n, step,
                    m.stream));
  } else {
    CHECK(gpu::sgd_momentum(m.params.get(), m.state1.get(), m.grad.get(), m.n, lr, m.momentum,
                            grad_scale, m.stream));
  }
  CHECK(cudaStreamSynchronize(m.stream));
}

GpuEpochStats CudaMlp::take_epoch_stats() {
  Impl& m = *impl_;
  double loss[2];
  unsigned long long correct = 0;
  CHECK(cudaMemcpy(loss, m.loss.get(), sizeof loss, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&correct, m.correct.get(), sizeof correct, cudaMemcpyDeviceToHost));
  CHECK(cudaMemset(m.loss.get() + 1, 0, sizeof(double)));
  CHECK(cudaMemset(m.correct.get(), 0, sizeof correct));
  return {loss[1], static_cast<std::int64_t>(correct)};
}

extern "C" GpuMlp* fmnist_make_cuda_mlp(const GpuMlpConfig& config) {
  return new CudaMlp(config);
}

}  // namespace fmnist
