// Calls for SYNK_TIMELINE (check_timeline.py runs it on 2 ranks and reads the trace): blocking
// all_reduce, broadcast and barrier, three iall_reduce and an ibroadcast outstanding at once, then
// a blocking all_reduce behind them. `world`: the first communicator is MPI_COMM_WORLD (one file
// for both ranks); `split`: it is a part of one rank, so each process writes FILE.<rank>, and the
// world communicator made next records there too. Its own main: the timeline starts with the
// first communicator of the process.
#include <mpi.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "synk/synk.h"

namespace {

int failures = 0;

void expect(bool ok, const char* what, int rank) {
  if (!ok) {
    std::printf("timeline_test: rank %d: FAILED: %s\n", rank, what);
    ++failures;
  }
}

void calls(synk::Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  std::vector<float> a(1000, 1.0f);  // 4000 bytes
  comm.all_reduce(a);
  expect(a[999] == static_cast<float>(n), "all_reduce", r);
  std::vector<std::int32_t> b(10, r == 0 ? 7 : 0);  // 40 bytes
  comm.broadcast(b, 0);
  expect(b[9] == 7, "broadcast", r);
  comm.barrier();

  std::vector<std::vector<double>> bufs(3, std::vector<double>(256, 1.0));  // 2048 bytes each
  std::vector<std::int64_t> c(4, r == 0 ? 5 : 0);                            // 32 bytes
  std::vector<synk::Request> reqs;
  for (auto& v : bufs) reqs.push_back(comm.iall_reduce(v));
  reqs.push_back(comm.ibroadcast(c, 0));
  synk::wait_all(reqs);
  for (auto& v : bufs) expect(v[255] == n, "iall_reduce", r);
  expect(c[3] == 5, "ibroadcast", r);
  comm.all_reduce(a);  // 4000 bytes again
  expect(a[0] == static_cast<float>(n * n), "all_reduce after the non-blocking ones", r);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "world";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    std::optional<synk::Communicator> part;
    if (mode == "split") {  // a communicator of this rank alone comes first
      MPI_Comm own = MPI_COMM_NULL;
      MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &own);
      part.emplace(own);
      MPI_Comm_free(&own);
      calls(*part);
    }
    synk::Communicator world;
    calls(world);
  } catch (const std::exception& e) {
    std::printf("timeline_test: rank %d: FAILED: %s\n", rank, e.what());
    ++failures;
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
