// What a rank sees of the hosts, for the multi-host test bed (tests/multihost):
//   host_probe layout          one line a rank: host, rank, the launcher's node rank, the
//                              communicator's node, local rank and size, backend
//   host_probe data GO_FILE    a Data of known rows loaded once per node; rank 0 prints
//                              "data held" and every rank waits for GO_FILE (the harness lists
//                              each host's /dev/shm meanwhile), then checks every row
//   host_probe allreduce N     all_reduce of N floats in a loop until it fails (a fault test)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "synk/data.h"
#include "synk/synk.h"

namespace {

constexpr std::size_t kRows = 1000;
constexpr std::size_t kCols = 256;  // 1000 x 256 floats: a 1 MB segment on each host

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

int print_layout(synk::Communicator& comm) {
  std::printf("layout host=%s rank=%d size=%d SYNK_NODE_RANK=%s node=%d nodes=%d local=%d/%d "
              "SYNK_LOCAL_RANK=%s backend=%s\n",
              host_name().c_str(), comm.rank(), comm.size(), env_or("SYNK_NODE_RANK", "-"),
              comm.node(), comm.num_nodes(), comm.local_rank(), comm.local_size(),
              env_or("SYNK_LOCAL_RANK", "-"), comm.backend().c_str());
  return 0;
}

float value_at(std::size_t row, std::size_t col) { return static_cast<float>(row * 7 + col % 13); }

int hold_data(synk::Communicator& comm, const std::string& go_file) {
  synk::Data<float> data(comm, {kRows, kCols});
  data.load([](float* rows) {
    for (std::size_t r = 0; r < kRows; ++r) {
      for (std::size_t c = 0; c < kCols; ++c) rows[r * kCols + c] = value_at(r, c);
    }
  });
  comm.barrier();
  if (comm.rank() == 0) {
    std::printf("data held: %zu x %zu floats\n", kRows, kCols);
    std::fflush(stdout);
  }
  while (access(go_file.c_str(), F_OK) != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t c = 0; c < kCols; ++c) wrong += data.data()[r * kCols + c] != value_at(r, c);
  }
  std::printf("data rank=%d host=%s segment=%s wrong=%zu\n", comm.rank(), host_name().c_str(),
              data.segment_name().c_str(), wrong);
  std::fflush(stdout);
  comm.barrier();
  return wrong == 0 ? 0 : 1;
}

int all_reduce_forever(synk::Communicator& comm, std::size_t count) {
  std::vector<float> v(count, 1.0f);
  for (long i = 0;; ++i) {
    comm.all_reduce(std::span<float>(v));
    if (i == 0 && comm.rank() == 0) {
      std::printf("all_reduce running: %zu floats\n", count);
      std::fflush(stdout);
    }
    std::fill(v.begin(), v.end(), 1.0f);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    synk::Communicator comm;
    if (mode == "layout") return print_layout(comm);
    if (mode == "data" && argc == 3) return hold_data(comm, argv[2]);
    if (mode == "allreduce" && argc == 3) return all_reduce_forever(comm, std::stoul(argv[2]));
    std::fprintf(stderr, "usage: host_probe layout | data GO_FILE | allreduce COUNT\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "host_probe: rank on %s: %s\n", host_name().c_str(), e.what());
    return 1;
  }
}
