// The Synkhronos walkthrough with synk: a Shared variable s, a Data x held once per node, and a
// Function whose update is s = column sums of (x * s) over the rows it is given; first SPMD,
// then driven by the master alone.
// Run: build/bin/synkrun -np 2 build/bin/shared_variables
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "example_cli.h"
#include "synk/synk.h"

namespace {

std::string fmt(const std::vector<float>& v, std::size_t row = 0) {
  if (row == 0) row = v.size();
  std::string s = v.size() > row ? "[" : "";
  for (std::size_t r = 0; r * row < v.size(); ++r) {
    s += r ? " [" : "[";
    for (std::size_t i = 0; i < row; ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, i ? " %g" : "%g", static_cast<double>(v[r * row + i]));
      s += buf;
    }
    s += "]";
  }
  return v.size() > row ? s + "]" : s;
}

// Prints a line of the walk-through, on the master only.
struct Say {
  bool master;
  void operator()(const std::string& what, const std::string& value) const {
    if (master) std::printf("%-47s %s\n", what.c_str(), value.c_str());
  }
};

// The SPMD half: every rank makes every call.
void spmd_calls(synk::Shared<float>& s, synk::Data<float>& x, synk::Function<float>& update,
                const Say& say) {
  say("s initial:", fmt(s.value()));
  update.local({&x});
  say("s after a local call on all of x:", fmt(s.value()));
  s.set_local({1, 1});
  update({&x});
  say("after a distributed call, the master's s:", fmt(s.value()));
  say("gather(s, nd_up=1):", fmt(s.gather(1), 2));
  s.reduce(synk::ReduceOp::sum);
  say("after reduce(s, sum), the master's s:", fmt(s.value()));
  say("gather(s, nd_up=1):", fmt(s.gather(1), 2));
  s.broadcast({1, 1});
  update({&x});
  s.all_reduce(synk::ReduceOp::sum);
  say("after broadcast, a call and all_reduce(s, sum):", fmt(s.gather(1), 2));
}

// Master-driven, as in Synkhronos: rank 0 runs the program alone and the others serve it.
// Functions of other types, and every collective of s and x, come from the master.
void master_driven_calls(synk::Communicator& comm, synk::Shared<float>& s, synk::Data<float>& x,
                         synk::Function<float>& update, const Say& say) {
  synk::Data<std::uint8_t> pixels(comm, {3, 2});
  pixels.set_value(say.master ? std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6}
                              : std::vector<std::uint8_t>{});
  synk::Function<std::uint8_t, double> mean_pixel(
      comm, "mean_pixel", {synk::Collect::weighted_avg},
      [](const synk::SliceInputs<std::uint8_t, double>& in) {
        double sum = 0;
        for (std::uint8_t v : in.data[0].values) sum += v;
        return synk::Function<std::uint8_t, double>::Outputs{
            {sum / static_cast<double>(2 * in.rows)}};
      });
  synk::Distributed dist(comm);
  dist.add(update);
  dist.add(mean_pixel);
  dist.add("x", x);
  dist.add("pixels", pixels);
  dist.add(s);
  if (!dist.serve()) return;  // a worker: it served until the master closed
  const double mean = dist.call(mean_pixel, {"pixels"})[0][0];
  say("master-driven: mean pixel (weighted_avg):", fmt({static_cast<float>(mean)}));
  s.broadcast({1, 1});
  dist.call(update, {"x"});
  s.all_reduce(synk::ReduceOp::sum);
  say("broadcast, a call, all_reduce(s, sum):", fmt(s.value()));
  s.set_value(1, {5, 5});
  say("set_value(1, {5, 5}), then get_value(1):", fmt(s.get_value(1)));
  s.set_local({0, 1, 2, 3, 4, 5}, {3, 2});
  s.scatter();
  say("scatter of 0..5 as 3 rows of 2, get_value(1):", fmt(s.get_value(1), 2));
  x.set_value(std::vector<float>(8, 2.0f));
  s.broadcast({1, 1});
  dist.call(update, {"x"});
  s.all_reduce(synk::ReduceOp::sum);
  say("x.set_value(all 2) after serve(), a call:", fmt(s.value()));
  dist.close();
}

}  // namespace

// What --help says.
constexpr const char* kAbout =
    "The Synkhronos walkthrough: a Shared variable, a Data held once per node and a Function "
    "run SPMD, then driven by the master alone. Needs 2 or more ranks. Run: synkrun -np 2 "
    "build/bin/shared_variables";

int main(int argc, char** argv) {
  const int code = synk_example::parse_no_options(argc, argv, "shared_variables", kAbout);
  if (code >= 0) return code;  // --help or a bad argument
  try {
    synk::Communicator comm;
    if (comm.size() < 2) {
      std::fprintf(stderr, "shared_variables: run it on 2 or more ranks (set_value(1, ...) needs "
                           "a rank 1): synkrun -np 2 shared_variables\n");
      return 2;
    }
    const Say say{comm.rank() == 0};
    synk::Shared<float> s(comm, "s", {1, 1});
    synk::Data<float> x(comm, {4, 2});
    x.set_value(say.master ? std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4} : std::vector<float>{});

    // The update stays local to each rank, as in Synkhronos; collectives are explicit.
    synk::Function<float> update(comm, "update", {}, [&](const synk::SliceInputs<float>& in) {
      std::vector<float> next(2, 0.0f);
      const std::vector<float>& cur = s.value();
      for (std::size_t r = 0; r < in.rows; ++r) {
        for (std::size_t c = 0; c < 2; ++c) next[c] += in.data[0].values[r * 2 + c] * cur[c];
      }
      s.value() = next;
      return synk::Function<float>::Outputs{};
    });
    spmd_calls(s, x, update, say);
    master_driven_calls(comm, s, x, update, say);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shared_variables: %s\n", e.what());
    return 1;
  }
}
