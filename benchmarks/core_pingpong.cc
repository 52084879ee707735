// core-pingpong: the round trip of one cache line between two cores, the mean of every 100000.
// On this machine (a 2-vCPU VM on an AMD EPYC host) it reads ~140 ns while the host runs both
// vCPUs on one CCX (one shared L3) and ~540 ns while it runs them on two, and the host switches
// every few seconds: the two modes behind the shm backend's store tuner (store_tuner.h) and
// behind the noise of synk-bench rows on it.
//
//   core-pingpong [SECONDS=5] [CPU_A=0] [CPU_B=1]
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "bench_cli.h"

namespace {

struct alignas(64) Line {
  std::atomic<long> value{0};
};
Line ping, pong;
constexpr long kTrips = 100000;

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Why cpu_a and cpu_b cannot be timed, or "": each must be one this process may run on, and
// they must differ (on one CPU every trip waits for a context switch: a line took minutes).
std::string cpu_problem(int cpu_a, int cpu_b) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return "";  // let pin() say it
  for (int cpu : {cpu_a, cpu_b}) {
    if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) {
      return "cannot run on cpu " + std::to_string(cpu) + " (it may run on " +
             std::to_string(CPU_COUNT(&allowed)) + " cpus)";
    }
  }
  if (cpu_a == cpu_b) return "cpu_a and cpu_b are both " + std::to_string(cpu_a) + ": give two";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5.0;
  int cpu_a = 0, cpu_b = 1;
  CLI::App app{"The round trip of one cache line between two cores, in ns, printed every 100000 "
               "trips: whether two vCPUs share a cache now",
               "core-pingpong"};
  app.add_option("seconds", seconds, "how long to run")
      ->check(CLI::Range(1e-3, 1e6))
      ->capture_default_str();
  app.add_option("cpu_a", cpu_a, "one core")
      ->check(CLI::Range(0, CPU_SETSIZE - 1))
      ->capture_default_str();
  app.add_option("cpu_b", cpu_b, "another core")
      ->check(CLI::Range(0, CPU_SETSIZE - 1))
      ->capture_default_str();
  if (const int code = synk::bench::parse_arguments(app, argc, argv); code >= 0) return code;
  if (const std::string why = cpu_problem(cpu_a, cpu_b); !why.empty()) {
    std::fprintf(stderr, "core-pingpong: %s\n", why.c_str());
    return 2;
  }
  if (!pin(cpu_a)) {
    std::fprintf(stderr, "core-pingpong: cannot run on cpu %d\n", cpu_a);
    return 2;
  }
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    if (!pin(cpu_b)) {  // both on cpu_a, each trip a context switch: no figure worth printing
      std::fprintf(stderr, "core-pingpong: cannot run on cpu %d\n", cpu_b);
      std::_Exit(2);
    }
    for (long i = 1; !stop.load(std::memory_order_relaxed); ++i) {
      while (ping.value.load(std::memory_order_acquire) != i) {
        if (stop.load(std::memory_order_relaxed)) return;
      }
      pong.value.store(i, std::memory_order_release);
    }
  });
  std::printf("# round trip of a cache line between cpu %d and cpu %d, ns (%ld trips each)\n",
              cpu_a, cpu_b, kTrips);
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  long i = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
         seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long k = 0; k < kTrips; ++k) {
      ++i;
      ping.value.store(i, std::memory_order_release);
      while (pong.value.load(std::memory_order_acquire) != i) {
      }
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%.0f\n", ns / kTrips);
    std::fflush(stdout);
  }
  stop.store(true);
  echo.join();
  return 0;
}
