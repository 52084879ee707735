// hello: the smallest synk program. Each rank prints who and where it is (as synkrun placed
// it) and the result of one all_reduce. Run: build/bin/synkrun -np 2 build/bin/hello
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "example_cli.h"
#include "synk/synk.h"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// The cpus this process may run on, "0-3,8", straight from the kernel.
std::string affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "?";
  std::string out;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (!CPU_ISSET(i, &set)) continue;
    int j = i;
    while (j + 1 < CPU_SETSIZE && CPU_ISSET(j + 1, &set)) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(i);
    if (j > i) {
      out += '-';
      out += std::to_string(j);
    }
    i = j;
  }
  return out;
}

}  // namespace

// What --help says.
constexpr const char* kAbout =
    "Each rank prints who and where it is (rank, host, cores, as synkrun placed it) and the "
    "result of one all_reduce. Run: synkrun -np 2 build/bin/hello";

int main(int argc, char** argv) {
  const int code = synk_example::parse_no_options(argc, argv, "hello", kAbout);
  if (code >= 0) return code;  // --help or a bad argument
  try {
    synk::Communicator comm;
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    // Every rank contributes rank + 1: the sum is n(n+1)/2 on every rank.
    std::vector<std::int64_t> value{comm.rank() + 1};
    comm.all_reduce(value);
    const std::int64_t n = comm.size();
    const bool ok = value[0] == n * (n + 1) / 2;
    std::printf(
        "hello from rank %d of %d (local rank %d of %d) on %s: gpu %s, cpus %s; "
        "all_reduce(rank+1) = %lld (%s)\n",
        comm.rank(), comm.size(), comm.local_rank(), comm.local_size(), host,
        env_or("SYNK_GPU", "").empty() ? "none" : env_or("SYNK_GPU", "").c_str(),
        affinity().c_str(), static_cast<long long>(value[0]), ok ? "ok" : "WRONG");
    std::fflush(stdout);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return 1;
  }
}
