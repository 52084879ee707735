// Tensor fusion in synk::KeyValue: every step each rank pushes KEYS keys of ELEMS float32 (by
// default 1,000 keys of 4 KiB, a model's many small gradients), pulls them all and waits, against
// the same reductions as KEYS blocking comm.all_reduce calls and as KEYS MPI_Allreduce calls on a
// duplicate of MPI_COMM_WORLD. The modes take turns in rounds of ROUND timed steps, each after
// one untimed step of its own (one mode's calls slow the next mode's first step: after a 4 MiB
// MPI_Allreduce a KeyValue step took twice its time), so all see the same machine; each row is
// the median over STEPS steps (after WARMUP) of the slowest rank's time per step, and `vs_mpi`
// is MPI's median over the row's. Whether KeyValue fuses is SYNK_FUSION_BYTES's
// (read once per process): the kv row says which, and bench_fusion.sh runs the program twice,
// once with SYNK_FUSION_BYTES=0, for one table of all four. Every pulled element is checked
// (inputs change every step, outside the timing); the exit status is 1 when any is wrong.
// Run: build/bin/synkrun -np 2 build/bin/bench_fusion [--modes kv,all_reduce,mpi] [--keys N]
//      [--elems N] [--steps N] [--round N] [--warmup N] [--no-header]
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_median.h"
#include "synk/key_value.h"
#include "synk/synk.h"

namespace {

using Clock = std::chrono::steady_clock;
using synk::bench::median;

struct Options {
  std::string modes = "kv,all_reduce,mpi";
  int keys = 1000;
  int elems = 1024;
  int steps = 20;
  int round = 5;
  int warmup = 3;
  bool no_header = false;
};

// One way of reducing every key once: its name and its step.
struct Mode {
  std::string name;
  std::function<void()> step;
  std::vector<double> times_us;  // per timed step, the slowest rank's
  std::int64_t wrong = 0;        // elements, over every step and rank
};

// Every key's input and output, one buffer each.
struct Buffers {
  std::vector<std::vector<float>> in, out;
  Buffers(int keys, int elems)
      : in(static_cast<std::size_t>(keys), std::vector<float>(static_cast<std::size_t>(elems))),
        out(in) {}
};

// Small integers, exact in float whatever the order of the sum: rank + 1 + (key + step) % 13.
float input_value(int rank, int key, int step) {
  return static_cast<float>(rank + 1 + (key + step) % 13);
}

void fill_inputs(Buffers& b, int rank, int step) {
  for (std::size_t k = 0; k < b.in.size(); ++k) {
    std::fill(b.in[k].begin(), b.in[k].end(), input_value(rank, static_cast<int>(k), step));
    std::fill(b.out[k].begin(), b.out[k].end(), -1.0f);
  }
}

std::int64_t count_wrong(const Buffers& b, int ranks, int step) {
  std::int64_t wrong = 0;
  for (std::size_t k = 0; k < b.out.size(); ++k) {
    float want = 0;
    for (int r = 0; r < ranks; ++r) want += input_value(r, static_cast<int>(k), step);
    wrong += std::count_if(b.out[k].begin(), b.out[k].end(), [&](float v) { return v != want; });
  }
  return wrong;
}

// "kv fused" (synk's default: 64 MiB), "kv fused NB" or "kv unfused", as SYNK_FUSION_BYTES says.
std::string kv_name() {
  const char* env = std::getenv("SYNK_FUSION_BYTES");
  const std::string text = env ? env : "";
  if (text.find_first_not_of(" \t") == std::string::npos) return "kv fused";
  return std::strtoull(text.c_str(), nullptr, 10) == 0 ? "kv unfused" : "kv fused " + text + "B";
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// The modes asked for, MPI's always last (it is the reference even when not printed).
std::vector<Mode> make_modes(const Options& o, synk::Communicator& comm, MPI_Comm mpi,
                             std::unique_ptr<synk::KeyValue>& kv, Buffers& b) {
  const auto count = static_cast<std::size_t>(o.elems);
  std::vector<Mode> modes;
  for (const std::string& m : split(o.modes)) {
    if (m == "kv") {
      kv = std::make_unique<synk::KeyValue>(comm);
      for (int k = 0; k < o.keys; ++k) kv->init_key(k, count, synk::DataType::float32);
      modes.push_back({kv_name(),
                       [&kv, &b] {
                         const int keys = static_cast<int>(b.in.size());
                         for (int k = 0; k < keys; ++k) {
                           kv->push(k, b.in[static_cast<std::size_t>(k)].data());
                           kv->pull(k, b.out[static_cast<std::size_t>(k)].data());
                         }
                         for (int k = 0; k < keys; ++k) kv->pull_wait(k);
                       },
                       {},
                       0});
    } else if (m == "all_reduce") {
      modes.push_back({"all_reduce",
                       [&comm, &b] {
                         for (std::size_t k = 0; k < b.in.size(); ++k)
                           comm.all_reduce(std::span<const float>(b.in[k]),
                                           std::span<float>(b.out[k]));
                       },
                       {},
                       0});
    } else if (m != "mpi") {
      throw std::invalid_argument("unknown mode '" + m + "' (kv, all_reduce, mpi)");
    }
  }
  modes.push_back({"MPI_Allreduce",
                   [mpi, count, &b] {
                     for (std::size_t k = 0; k < b.in.size(); ++k)
                       MPI_Allreduce(b.in[k].data(), b.out[k].data(), static_cast<int>(count),
                                     MPI_FLOAT, MPI_SUM, mpi);
                   },
                   {},
                   0});
  return modes;
}

// One step of a mode: fresh inputs, the timed step, the check.
void run_step(Mode& mode, Buffers& b, MPI_Comm mpi, int rank, int ranks, int step, bool timed) {
  fill_inputs(b, rank, step);
  MPI_Barrier(mpi);
  const auto t0 = Clock::now();
  mode.step();
  double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, mpi);
  std::int64_t wrong = count_wrong(b, ranks, step);
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, mpi);
  mode.wrong += wrong;
  if (timed) mode.times_us.push_back(us);
}

void print_table(const Options& o, const std::vector<Mode>& modes, bool with_mpi, int ranks,
                 const std::string& backend) {
  if (!o.no_header) {
    std::printf(
        "# bench_fusion: %d ranks, backend %s; per step %d keys of %d float32 (%d B), "
        "pushed and pulled; median of %d steps (rounds of %d) after %d warmup\n",
        ranks, backend.c_str(), o.keys, o.elems, o.elems * 4, o.steps, o.round, o.warmup);
    std::printf("%-16s %6s %9s %14s %10s %12s %8s %7s\n", "mode", "keys", "bytes/key",
                "time/step(us)", "us/key", "mpi(us)", "vs_mpi", "#wrong");
  }
  const double mpi_us = median(modes.back().times_us);
  for (const Mode& m : modes) {
    if (&m == &modes.back() && !with_mpi) break;
    const double us = median(m.times_us);
    std::printf("%-16s %6d %9d %14.1f %10.3f %12.1f %7.2fx %7lld\n", m.name.c_str(), o.keys,
                o.elems * 4, us, us / o.keys, mpi_us, mpi_us / us, static_cast<long long>(m.wrong));
  }
  std::fflush(stdout);
}

// Why --modes cannot be run, or "": its items are kv, all_reduce and mpi, each once (a second
// kv replaced the first KeyValue, and both rows timed the second).
std::string modes_problem(const std::string& list) {
  const std::vector<std::string> items = split(list);
  if (items.empty()) return "names no mode (kv, all_reduce, mpi)";
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string& m = items[i];
    if (m != "kv" && m != "all_reduce" && m != "mpi") {
      return "unknown mode '" + m + "' (kv, all_reduce, mpi)";
    }
    if (std::find(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(i), m) !=
        items.begin() + static_cast<std::ptrdiff_t>(i)) {
      return "mode '" + m + "' is named twice";
    }
  }
  return "";
}

int parse(int argc, char** argv, Options& o) {
  CLI::App app{"KeyValue's fusion of many small keys against one collective per key",
               "bench_fusion"};
  app.add_option("--modes", o.modes,
                 "comma-separated: kv, all_reduce, mpi (MPI is always timed, "
                 "for vs_mpi)")
      ->check(CLI::Validator([](std::string& list) { return modes_problem(list); }, "LIST"))
      ->capture_default_str();
  app.add_option("--keys", o.keys, "keys per step")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--elems", o.elems, "float32 elements per key")
      ->check(CLI::Range(1, 1 << 26))
      ->capture_default_str();
  app.add_option("--steps", o.steps, "timed steps")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--round", o.round, "timed steps per turn of a mode")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed steps of every mode first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_flag("--no-header", o.no_header, "print the rows only (to append to another table)");
  return synk::bench::parse_arguments(app, argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int code = parse(argc, argv, o); code >= 0) return code;
  try {
    synk::Communicator comm;
    MPI_Comm mpi;  // MPI's own calls and the timing's barriers, apart from synk's
    MPI_Comm_dup(MPI_COMM_WORLD, &mpi);
    const int rank = comm.rank(), ranks = comm.size();
    Buffers b(o.keys, o.elems);
    std::unique_ptr<synk::KeyValue> kv;
    std::vector<Mode> modes = make_modes(o, comm, mpi, kv, b);
    int step = 0;  // every step's inputs differ
    for (int w = 0; w < o.warmup; ++w) {
      for (Mode& m : modes) run_step(m, b, mpi, rank, ranks, step++, false);
    }
    for (int timed = 0; timed < o.steps; timed += o.round) {
      for (Mode& m : modes) {
        run_step(m, b, mpi, rank, ranks, step++, false);
        for (int i = 0; i < std::min(o.round, o.steps - timed); ++i)
          run_step(m, b, mpi, rank, ranks, step++, true);
      }
    }
    if (kv) kv->close();
    const std::vector<std::string> asked = split(o.modes);
    const bool with_mpi = std::find(asked.begin(), asked.end(), "mpi") != asked.end();
    if (rank == 0) print_table(o, modes, with_mpi, ranks, comm.backend());
    std::int64_t wrong = 0;
    for (const Mode& m : modes) wrong += m.wrong;
    kv.reset();
    MPI_Comm_free(&mpi);
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_fusion: %s\n", e.what());
    return 1;
  }
}
