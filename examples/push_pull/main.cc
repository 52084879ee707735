// push_pull: mshadow-ps's walkthrough on synk::KeyValue. Run: build/bin/synkrun -np 2
// build/bin/push_pull
//
// 1. Push and pull: every rank pushes key 3 (4 floats, each rank+1) and key 7 (2 floats, each
//    10*(rank+1)), pulls both and waits; each pull returns the sum over the ranks, on n ranks
//    n(n+1)/2 in every element of key 3 (3 on 2 ranks) and 10 times that in key 7 (30).
// 2. Update on the owner: with an Updater (here SGD, weights -= lr * reduced gradient) each key
//    has an owner rank that alone keeps and updates its weights; a pull returns the owner's
//    new weights. Key 10 starts at {1, 2, 3} and key 11 at five 0s (rank 0's values); every
//    step each rank pushes the gradient rank+1 (key 10) and 1 (key 11), so after 2 steps with
//    lr 0.1 on n ranks key 10 is {1, 2, 3} - 0.2 * n(n+1)/2 and key 11 is -0.2 * n: on 2 ranks
//    {0.4, 1.4, 2.4} and five -0.4, the same on every rank.
// Exit status 0 when every value is the expected one.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "synk/key_value.h"
#include "example_cli.h"
#include "synk/synk.h"

namespace {

std::string join(std::span<const float> v) {
  std::string out;
  for (float x : v) {
    char text[32];
    std::snprintf(text, sizeof text, "%s%g", out.empty() ? "" : " ", static_cast<double>(x));
    out += text;
  }
  return out;
}

bool all_near(std::span<const float> got, std::span<const float> expected) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - expected[i]) > 1e-5f) return false;
  return true;
}

// Part 1: the reduction of two keys, one pulled into the pushed buffer, one elsewhere with a
// callback.
bool push_and_pull(synk::Communicator& comm) {
  const int n = comm.size();
  const float rank1 = static_cast<float>(comm.rank() + 1);
  const float sum = static_cast<float>(n * (n + 1) / 2);  // of rank+1 over the ranks

  synk::KeyValue kv(comm);
  kv.init_key(3, 4, synk::DataType::float32);  // collective, the same order on every rank
  kv.init_key(7, 2, synk::DataType::float32);

  std::vector<float> key3(4, rank1), key7(2, 10 * rank1), out7(2, 0.0f);
  kv.push(3, std::span<const float>(key3), /*priority=*/1);
  kv.push(7, std::span<const float>(key7));
  kv.pull(3, std::span<float>(key3), 1);  // the sum comes back into the pushed buffer
  std::atomic<bool> called{false};
  kv.pull(7, std::span<float>(out7), 0, [&called] { called = true; });  // on synk's thread
  kv.pull_wait(3);
  kv.pull_wait(7);
  kv.close();

  const std::vector<float> want3(4, sum), want7(2, 10 * sum);
  const bool ok = all_near(key3, want3) && all_near(out7, want7) && called;
  if (comm.rank() == 0) {
    std::printf("key 3 (4 floats, rank+1 from each rank): pulled %s (expected %g)\n",
                join(key3).c_str(), static_cast<double>(sum));
    std::printf(
        "key 7 (2 floats, 10*(rank+1) from each rank): pulled %s (expected %g); "
        "pull callback ran: %s\n",
        join(out7).c_str(), static_cast<double>(10 * sum), called ? "yes" : "no");
  }
  return ok;
}

// mshadow-ps's IModelUpdater as plain SGD; it runs on each key's owner only.
class SgdUpdater final : public synk::Updater {
 public:
  explicit SgdUpdater(float lr) : lr_(lr) {}
  void update(int /*key*/, synk::KeyArray reduced_gradient, synk::KeyArray weights) override {
    const std::span<const float> g = reduced_gradient.as<float>();
    const std::span<float> w = weights.as<float>();
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= lr_ * g[i];
  }

 private:
  float lr_;
};

// Part 2: two steps of SGD on the keys' owners; every rank pulls the new weights.
bool update_on_owner(synk::Communicator& comm) {
  constexpr float kLr = 0.1f;
  constexpr int kSteps = 2;
  const int n = comm.size();
  const float rank1 = static_cast<float>(comm.rank() + 1);

  synk::KeyValue kv(comm, {.updater = std::make_shared<SgdUpdater>(kLr)});
  // Only rank 0's initial weights count; the others' are never read.
  const float mine = comm.rank() == 0 ? 0.0f : -99.0f;
  std::vector<float> w10{1 + mine, 2 + mine, 3 + mine}, w11(5, mine);
  kv.init_key(10, std::span<const float>(w10));
  kv.init_key(11, std::span<const float>(w11));

  std::vector<float> g10(3), g11(5);
  for (int step = 0; step < kSteps; ++step) {
    g10.assign(3, rank1);
    g11.assign(5, 1.0f);
    kv.push(10, std::span<const float>(g10));
    kv.push(11, std::span<const float>(g11));
    kv.pull(10, std::span<float>(w10));  // the owner's weights after its update
    kv.pull(11, std::span<float>(w11));
    kv.pull_wait(10);
    kv.pull_wait(11);
  }
  const int owner10 = kv.owner(10), owner11 = kv.owner(11);
  kv.close();

  const float drop10 = kSteps * kLr * static_cast<float>(n * (n + 1) / 2);
  const float drop11 = kSteps * kLr * static_cast<float>(n);
  const std::vector<float> want10{1 - drop10, 2 - drop10, 3 - drop10}, want11(5, -drop11);
  const bool ok = all_near(w10, want10) && all_near(w11, want11);
  std::printf(
      "rank %d: owner(10) = %d, owner(11) = %d; after %d steps key 10 = {%s}, "
      "key 11 = {%s} (%s)\n",
      comm.rank(), owner10, owner11, kSteps, join(w10).c_str(), join(w11).c_str(),
      ok ? "as expected" : "WRONG");
  return ok;
}

}  // namespace

// What --help says.
constexpr const char* kAbout =
    "mshadow-ps's walkthrough on synk::KeyValue: push and pull by key, then an update (SGD) "
    "on each key's owner; every rank checks the sums and weights it pulled (exit 0 when all "
    "are right). Run: synkrun -np 2 build/bin/push_pull";

int main(int argc, char** argv) {
  const int code = synk_example::parse_no_options(argc, argv, "push_pull", kAbout);
  if (code >= 0) return code;  // --help or a bad argument
  try {
    synk::Communicator comm;
    if (comm.rank() == 0) std::printf("push_pull: %d rank(s)\n", comm.size());
    bool ok = push_and_pull(comm);
    std::fflush(stdout);
    ok = update_on_owner(comm) && ok;
    std::fflush(stdout);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "push_pull: %s\n", e.what());
    return 1;
  }
}
