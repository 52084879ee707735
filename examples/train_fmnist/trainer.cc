// See trainer.h.
#include "trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <span>

namespace fmnist {

namespace {

std::string non_finite_text(int epoch, std::size_t step, std::size_t steps, double loss,
                            float lr) {
  char text[160];
  std::snprintf(text, sizeof text,
                "the training loss is %g at epoch %d, step %zu of %zu (learning rate %g)",
                std::isnan(loss) ? std::fabs(loss) : loss,  // "nan", not "-nan"
                epoch, step, steps, static_cast<double>(lr));
  return text;
}

}  // namespace

NonFiniteLoss::NonFiniteLoss(int epoch, std::size_t step, std::size_t steps, double loss, float lr)
    : std::runtime_error(non_finite_text(epoch, step, steps, loss, lr)) {}

Trainer::Trainer(synk::Communicator& comm, DatasetView train,
                 const synk::Data<std::uint8_t>& test_pixels,
                 const synk::Data<std::uint8_t>& test_labels, TrainConfig config)
    : comm_(comm),
      train_(train),
      test_pixels_(test_pixels),
      test_labels_(test_labels),
      evaluate_(comm, "evaluate", {synk::Collect::sum},
                [this](const synk::SliceInputs<std::uint8_t, double>& in) {
                  // A slice is a contiguous view into the node's shared copy of the test set.
                  const DatasetView slice{in.data[0].values.data(), in.data[1].values.data(),
                                          in.rows, test_pixels_.row_elems()};
                  std::vector<std::uint32_t> idx(in.rows);
                  std::iota(idx.begin(), idx.end(), 0u);
                  gather_rows(slice, idx, x_, y_);
                  const BatchStats s = in.rows ? model_.evaluate(x_, y_) : BatchStats{};
                  return synk::Function<std::uint8_t, double>::Outputs{
                      {static_cast<double>(s.correct), static_cast<double>(s.count)}};
                }),
      config_(std::move(config)),
      model_(config_.layers),
      optimizer_(
          make_optimizer(config_.optimizer, model_.num_params(), config_.lr, config_.momentum)),
      order_(train.count),
      grad_(comm, "grad", std::vector<float>(model_.num_params() + 2)) {
  if (comm_.rank() == 0) model_.init(config_.seed);
  comm_.broadcast(model_.params(), 0);
  if (config_.device == "cuda") {
    const std::size_t max_rows = (config_.batch + static_cast<std::size_t>(comm_.size()) - 1) /
                                 static_cast<std::size_t>(comm_.size());
    device_ = std::make_unique<DevicePath>(comm_, config_, max_rows);
    device_->model->set_params(model_.params());
  }
  if (config_.overlap) {
    overlap_ = std::make_unique<LayerExchange>(comm_, model_, config_.optimizer, config_.lr,
                                               config_.momentum);
  }
  std::iota(order_.begin(), order_.end(), 0u);
}

float Trainer::scheduled_lr(int epoch, std::size_t step) const {
  const double total = static_cast<double>(steps_per_epoch()) * std::max(config_.epochs, 1);
  const double done =
      static_cast<double>(steps_per_epoch()) * (epoch - 1) + static_cast<double>(step);
  const double pi = 3.14159265358979323846;
  return static_cast<float>(config_.lr * 0.5 * (1.0 + std::cos(pi * std::min(done / total, 1.0))));
}

std::size_t Trainer::steps_per_epoch() const {
  return (train_.count + config_.batch - 1) / config_.batch;
}

EpochRecord Trainer::run_epoch(int epoch,
                               const std::function<void(std::size_t, std::size_t)>& progress) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // The same permutation on every rank: a common seed, and the same binary's std::shuffle.
  std::mt19937_64 rng(config_.seed * 1000003u + static_cast<std::uint64_t>(epoch));
  std::shuffle(order_.begin(), order_.end(), rng);

  BatchStats local;
  const std::size_t steps = steps_per_epoch();
  const std::size_t n = model_.num_params();
  for (std::size_t step = 0; step < steps; ++step) {
    const std::size_t begin = step * config_.batch;
    const std::size_t global = std::min(config_.batch, train_.count - begin);  // last may be short
    const Range mine = linspace_share(global, comm_.rank(), comm_.size());
    const auto rows =
        std::span<const std::uint32_t>(order_).subspan(begin + mine.lo, mine.hi - mine.lo);
    if (!device_) gather_rows(train_, rows, x_, y_);
    const float lr = config_.schedule == "cosine" ? scheduled_lr(epoch, step) : config_.lr;
    const float grad_scale = 1.0f / static_cast<float>(global);  // the global-batch mean
    StepSums sums;
    if (device_) {
      device_step(rows, sums);
      local.count += static_cast<std::int64_t>(rows.size());
    } else {
      const BatchStats s =
          overlap_ ? overlap_->step(x_, y_, {lr, grad_scale}, sums) : all_reduce_step(sums);
      local.loss_sum += s.loss_sum;
      local.correct += s.correct;
      local.count += s.count;
    }
    if (sums.non_finite > 0) {
      throw NonFiniteLoss(epoch, step + 1, steps, sums.loss_sum / static_cast<double>(global), lr);
    }
    if (device_) {
      device_->model->update(lr, grad_scale);
    } else if (!overlap_) {  // with overlap, each layer's update comes before its next forward
      optimizer_->set_lr(lr);
      optimizer_->step(model_.params(), std::span<const float>(grad_.value()).first(n),
                       grad_scale);
    }
    if (progress) progress(step + 1, steps);
  }

  if (overlap_) overlap_->finish();
  if (device_) {  // the epoch's sums, and the parameters for the test evaluation on the host
    const GpuEpochStats stats = device_->model->take_epoch_stats();
    local.loss_sum = stats.loss_sum;
    local.correct = stats.correct;
    device_->model->get_params(model_.params());
  }
  // One all_reduce per epoch for the training stats; counts are exact in double below 2^53.
  std::vector<double> sums{local.loss_sum, static_cast<double>(local.correct),
                           static_cast<double>(local.count)};
  comm_.all_reduce(sums, synk::ReduceOp::sum);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  EpochRecord rec;
  rec.epoch = epoch;
  rec.train_loss = sums[0] / sums[2];
  rec.train_accuracy = sums[1] / sums[2];
  rec.seconds = seconds;
  rec.images_per_s = sums[2] / seconds;
  rec.test_accuracy = test_accuracy();
  return rec;
}

BatchStats Trainer::all_reduce_step(StepSums& sums) {
  std::vector<float>& buf = grad_.value();
  const std::size_t n = model_.num_params();
  const BatchStats s = model_.loss_and_gradient(x_, y_, std::span<float>(buf).first(n));
  // The ranks decide on the sum of 0s and 1s, exact in any order: a sum of losses could
  // overflow on one rank's order of addition and not on another's.
  buf[n] = static_cast<float>(s.loss_sum);
  buf[n + 1] = std::isfinite(buf[n]) ? 0.0f : 1.0f;
  grad_.all_reduce(synk::ReduceOp::sum);  // the one collective of the step
  sums = {buf[n], buf[n + 1]};
  return s;
}

void Trainer::device_step(std::span<const std::uint32_t> rows, StepSums& sums) {
  GpuMlp& model = *device_->model;
  const std::size_t n = model.num_params();
  model.load_batch(train_, rows);
  model.loss_and_gradient();
  // The one collective of the step, on device memory: the gradient and the two sums after it.
  device_->nccl.all_reduce(model.gradient(), model.gradient(), n + 2, synk::DataType::float32,
                           synk::ReduceOp::sum);
  model.read_sums(sums.loss_sum, sums.non_finite);
}

double Trainer::test_accuracy() {
  constexpr std::size_t kSlice = 1024;
  const std::size_t per_rank =
      (test_pixels_.rows() + static_cast<std::size_t>(comm_.size()) - 1) /
      static_cast<std::size_t>(comm_.size());
  synk::CallOptions o;
  o.num_slices = static_cast<int>(std::max<std::size_t>(1, (per_rank + kSlice - 1) / kSlice));
  o.to_all = true;
  const auto totals = evaluate_({&test_pixels_, &test_labels_}, {}, o)[0];
  return totals[1] > 0 ? totals[0] / totals[1] : 0.0;
}

}  // namespace fmnist
