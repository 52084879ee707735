// train_fmnist: data-parallel training of an MLP (784-256-128-10) on Fashion-MNIST with synk.
// Run: build/bin/synkrun -np 2 build/bin/train_fmnist --epochs 10   (or alone, as one rank)
#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "dataset.h"
#include "example_cli.h"
#include "idx_reader.h"
#include "report.h"
#include "synk/synk.h"
#include "trainer.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;      // bad command line, missing or corrupt data, unusable backend
constexpr int kExitNonFinite = 3;  // the training loss became NaN or infinite

struct Options {
  int epochs = 5;
  std::size_t batch = 256;
  float lr = 0;  // 0: the optimizer's default
  float momentum = 0.9f;
  std::string optimizer = "sgd";
  std::string schedule = "cosine";
  std::uint64_t seed = 1;
  std::string backend;  // "": SYNK_BACKEND's, else auto (as every synk program)
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::size_t limit = 0;
  std::string json;
  bool overlap = false;
  std::string device = "cpu";
};

using synk_example::launcher_rank;

// A check for a float option: a number for which in_range holds, else "the NAME must be a
// number BOUNDS, not TEXT". By hand, since CLI::Range and CLI::PositiveNumber let nan through
// (5 epochs of nan loss, exit 0) and PositiveNumber printed its bound as a 300-digit number.
CLI::Validator float_check(const std::string& name, const std::string& bounds,
                           bool (*in_range)(float), const std::string& type) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const float v = std::strtof(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !in_range(v)) {
          return "the " + name + " must be a number " + bounds + ", not " + text;
        }
        return "";
      },
      type);
}

// A check for a whole-number option: up to 19 digits (a sign is refused, as "-1" would wrap to
// 2^64 - 1 in an unsigned option) from `low` to `high`, else "the NAME must be a whole number
// WHAT, not TEXT". By hand, as CLI::Range called 1.5 epochs "not in range 1 to 100000".
CLI::Validator whole_check(const std::string& name, const std::string& what,
                           std::uint64_t low = 0, std::uint64_t high = UINT64_MAX) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.size() <= 19 &&
                            text.find_first_not_of("0123456789") == std::string::npos;
        const std::uint64_t v = digits ? std::stoull(text) : 0;
        if (digits && v >= low && v <= high) return "";
        return "the " + name + " must be a whole number " + what + ", not " + text;
      },
      high == UINT64_MAX ? "" : "[" + std::to_string(low) + ", " + std::to_string(high) + "]");
}

// Returns -1 when the run should go on, else the exit code.
int parse(int argc, char** argv, Options& o) {
  CLI::App app{
      "Data-parallel training of an MLP (784-256-128-10, ReLU, softmax cross-entropy) "
      "on Fashion-MNIST. Every rank computes the gradient of its share of each global "
      "batch; one synk all_reduce per step makes the global mean.",
      "train_fmnist"};
  app.add_option("--epochs", o.epochs, "epochs to train")
      ->check(whole_check("number of epochs", "from 1 to 100000", 1, 100000))
      ->capture_default_str();
  app.add_option("--batch", o.batch, "global batch size (over all ranks)")
      ->check(whole_check("batch", "from 1 to 1048576", 1, std::uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "learning rate, above 0 and at most 10 (default 0.1 for sgd, "
                               "0.001 for adam)")
      ->check(float_check("learning rate", "above 0 and at most 10",
                          [](float v) { return v > 0.0f && v <= 10.0f; }, "(0, 10]"));
  app.add_option("--momentum", o.momentum, "momentum of sgd, at least 0 and below 1")
      ->check(float_check("momentum", "at least 0 and below 1",
                          [](float v) { return v >= 0.0f && v < 1.0f; }, "[0, 1)"))
      ->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "sgd (with momentum) or adam")
      ->check(CLI::IsMember({"sgd", "adam"}))
      ->capture_default_str();
  app.add_option("--schedule", o.schedule,
                 "learning rate schedule: cosine (from lr to 0 over all the epochs) or constant")
      ->check(CLI::IsMember({"cosine", "constant"}))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the initial parameters and the shuffles")
      ->check(whole_check("seed", "from 0 to 10^19 - 1"))
      ->capture_default_str();
  app.add_option("--backend", o.backend, "synk backend (default: SYNK_BACKEND, else auto)")
      ->check(CLI::IsMember({"auto", "mpi", "shm"}));
  app.add_option("--data", o.data,
                 "directory of the IDX files ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz])")
      ->check([](const std::string& dir) {
        return dir.empty() ? std::string("give a directory, not an empty name") : "";
      })
      ->capture_default_str();
  app.add_option("--limit", o.limit, "use only the first N training images (0: all)")
      ->check(whole_check("limit", "of images (0 for all)"))
      ->capture_default_str();
  app.add_option("--json", o.json, "write the per-epoch records to this file (rank 0)");
  app.add_flag("--overlap", o.overlap,
               "push each layer's gradient as soon as backprop has made it (synk::KeyValue) and "
               "wait for it just before the layer's next forward, instead of one all_reduce "
               "per step; the same updates");
  app.add_option("--device", o.device,
                 "cpu, or cuda: the forward, backward and update on this rank's GPU (cuBLAS), "
                 "batches staged from the node's shared copy, the gradient all-reduced by NCCL "
                 "on device memory (one GPU per rank: start with synkrun)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.footer(
      "Exit status: 0 success; 1 failure while training; 2 bad command line, missing or "
      "corrupt data, or an unavailable backend; 3 the training loss became NaN or infinite "
      "(the run stops at the first such step, on every rank; a lower --lr may help).");
  if (const int code = synk_example::parse_command_line(app, argc, argv, "train_fmnist");
      code >= 0) {
    return code;
  }
  if (o.lr == 0) o.lr = o.optimizer == "adam" ? 0.001f : 0.1f;
  if (o.overlap && o.device == "cuda") {
    if (launcher_rank() == 0) {
      std::fprintf(stderr,
                   "train_fmnist: --overlap is for --device cpu; on cuda the gradient goes in "
                   "one NCCL all_reduce (see --help)\n");
    }
    return kExitUsage;
  }
  return -1;
}

// Every rank learns whether any rank failed in set-up; the lowest failing rank prints its
// message, and all exit alike (no rank is left waiting in a collective).
bool all_ok(synk::Communicator& comm, const std::string& error) {
  std::vector<std::int32_t> first{error.empty() ? comm.size() : comm.rank()};
  comm.all_reduce(first, synk::ReduceOp::min);
  if (!error.empty() && first[0] == comm.rank())
    std::fprintf(stderr, "train_fmnist: %s\n", error.c_str());
  return first[0] == comm.size();
}

// Local rank 0 of a node reads the files: "" or what went wrong, for every rank to hear.
std::string read_files(const Options& o, fmnist::Dataset& train, fmnist::Dataset& test) {
  try {
    train = fmnist::load_fashion_mnist(o.data, "train", o.limit);
    test = fmnist::load_fashion_mnist(o.data, "t10k");
    if (train.dim != 784 || test.dim != 784) return o.data + ": images are not 28x28";
  } catch (const fmnist::IdxError& e) {
    std::string error = e.what();
    if (o.data == Options{}.data && error.find("cannot open") != std::string::npos) {
      error += " (the Debian package dataset-fashion-mnist puts the files there; make run "
               "installs it)";
    }
    return error;
  } catch (const std::exception& e) {  // no memory for the images, say: the others must hear
    return o.data + ": " + e.what();
  }
  return "";
}

fmnist::TrainConfig config_of(const Options& o, std::size_t n_train) {
  fmnist::TrainConfig config;
  // A batch past the images is the whole set (and the GPU's buffers are sized by it).
  config.batch = std::max<std::size_t>(1, std::min(o.batch, n_train));
  config.optimizer = o.optimizer;
  config.lr = o.lr;
  config.momentum = o.momentum;
  config.seed = o.seed;
  config.schedule = o.schedule;
  config.epochs = o.epochs;
  config.overlap = o.overlap;
  config.device = o.device;
  return config;
}

// Rank 0's first line, and its notes on --limit and --batch past the images.
void print_start(const Options& o, const synk::Communicator& comm, const fmnist::Trainer& trainer,
                 const fmnist::TrainConfig& config, std::size_t n_train, std::size_t n_test) {
  char momentum[32] = "";
  if (o.optimizer == "sgd") {
    std::snprintf(momentum, sizeof momentum, " momentum %g", static_cast<double>(o.momentum));
  }
  std::printf(
      "train_fmnist: %d rank(s), backend %s%s; %zu train / %zu test images; batch %zu, "
      "%zu steps/epoch; %s lr %g (%s)%s; seed %llu%s\n",
      comm.size(), comm.backend().c_str(),
      o.device == "cuda" ? ", on the GPU (gradients through nccl)" : "", n_train, n_test,
      config.batch, trainer.steps_per_epoch(), o.optimizer.c_str(), static_cast<double>(o.lr),
      o.schedule.c_str(), momentum, static_cast<unsigned long long>(o.seed),
      o.overlap ? "; gradients overlapped layer by layer" : "");
  if (o.limit > n_train) {
    std::fprintf(stderr, "train_fmnist: note: --limit %zu is more than the %zu training images: "
                         "all are used\n", o.limit, n_train);
  }
  if (config.batch < o.batch) {
    std::fprintf(stderr, "train_fmnist: note: --batch %zu is more than the %zu training images: "
                         "each step takes them all\n", o.batch, n_train);
  }
  std::fflush(stdout);
}

// The epochs, reported by rank 0 (report is null elsewhere).
int train_epochs(const Options& o, fmnist::Trainer& trainer, fmnist::Report* report, bool root) {
  try {
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
      const fmnist::EpochRecord rec =
          trainer.run_epoch(epoch, [&](std::size_t step, std::size_t steps) {
            if (report) report->progress(epoch, step, steps);
          });
      if (report) report->epoch(rec);
    }
  } catch (const fmnist::NonFiniteLoss& e) {  // thrown on every rank alike
    if (report) report->clear_progress();
    if (root) std::fprintf(stderr, "train_fmnist: %s; stopped: try a lower --lr\n", e.what());
    return kExitNonFinite;
  }
  return 0;
}

int run(const Options& o) {
  Eigen::setNbThreads(1);  // one thread per rank: the ranks are the parallelism
  std::unique_ptr<synk::Communicator> comm;
  try {
    comm = std::make_unique<synk::Communicator>(synk::CommOptions{o.backend});
  } catch (const synk::Error& e) {
    std::fprintf(stderr, "train_fmnist: %s\n", e.what());
    return kExitUsage;
  }
  const bool root = comm->rank() == 0;

  // Once per node: local rank 0 reads the files, and every local rank reads its rows straight
  // from the node's shared copy (synk::Data).
  fmnist::Dataset train_file, test_file;
  std::string error;
  if (comm->local_rank() == 0) error = read_files(o, train_file, test_file);
  std::unique_ptr<fmnist::Report> report;
  if (error.empty() && root) {
    try {
      report = std::make_unique<fmnist::Report>(o.json, fmnist::stdout_is_terminal());
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!all_ok(*comm, error)) return kExitUsage;
  // The shapes, from the node leaders (every node reads the same files).
  std::vector<std::uint64_t> shape{train_file.count, test_file.count, train_file.dim};
  comm->all_reduce(shape, synk::ReduceOp::max);
  const std::size_t n_train = shape[0], n_test = shape[1], dim = shape[2];
  synk::Data<std::uint8_t> train_pixels(*comm, {n_train, dim}), train_labels(*comm, {n_train});
  synk::Data<std::uint8_t> test_pixels(*comm, {n_test, dim}), test_labels(*comm, {n_test});
  auto fill = [](const std::vector<std::uint8_t>& from) {
    return [&from](std::uint8_t* to) { std::copy(from.begin(), from.end(), to); };
  };
  train_pixels.load(fill(train_file.pixels));
  train_labels.load(fill(train_file.labels));
  test_pixels.load(fill(test_file.pixels));
  test_labels.load(fill(test_file.labels));
  train_file = {};
  test_file = {};
  const fmnist::DatasetView train{train_pixels.data(), train_labels.data(), n_train, dim};

  const fmnist::TrainConfig config = config_of(o, n_train);
  std::unique_ptr<fmnist::Trainer> trainer;
  try {
    trainer = std::make_unique<fmnist::Trainer>(*comm, train, test_pixels, test_labels, config);
  } catch (const std::exception& e) {
    // --device cuda where no GPU (or no CUDA build) is: an unavailable backend, on every rank.
    if (o.device != "cuda") throw;
    if (root) std::fprintf(stderr, "train_fmnist: %s\n", e.what());
    return kExitUsage;
  }
  if (root) print_start(o, *comm, *trainer, config, n_train, n_test);
  return train_epochs(o, *trainer, report.get(), root);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int code = parse(argc, argv, o); code >= 0) return code;
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_fmnist: rank %d: %s\n", launcher_rank(), e.what());
    return kExitFailure;
  }
}
