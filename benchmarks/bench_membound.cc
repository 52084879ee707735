// See bench_membound.h. The traffic models follow the algorithms in
// libsynk/src/backends/shm/shm_collectives.cc (copies count a read and a write).
#include "bench_membound.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

namespace synk::bench {

double probe_copy_bandwidth(MPI_Comm comm) {
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  std::vector<unsigned char> a(kBytes, 1), b(kBytes, 2);
  std::memcpy(b.data(), a.data(), kBytes);  // warm-up: pages touched
  std::vector<double> times;
  for (int rep = 0; rep < 5; ++rep) {
    MPI_Barrier(comm);
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(rep % 2 ? a.data() : b.data(), rep % 2 ? b.data() : a.data(), kBytes);
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
    times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  return 2.0 * static_cast<double>(kBytes) / times[times.size() / 2];
}

double shm_traffic_bytes(Coll coll, std::size_t bytes, int n) {
  const double s = static_cast<double>(bytes), per_rank = s / n;
  switch (coll) {
    case Coll::allreduce:  // copy in, reduce own slice of every slot, copy the result out
    case Coll::reduce:     // the root's share
      return 2 * s + (s + per_rank) + 2 * s;
    case Coll::broadcast:  // the root copies in, the others copy out, in parallel
      return 2 * s;
    case Coll::allgather:  // copy own block in, every block out
      return 2 * per_rank + 2 * s;
    case Coll::reduce_scatter:  // copy all blocks in, reduce own block of every slot
      return 2 * s + s + per_rank;
    case Coll::gather:  // the root: own block in, every block out
      return 2 * per_rank + 2 * s;
    case Coll::scatter:  // the root copies every block in
      return 2 * s;
  }
  return 0;
}

std::string membound_line(const std::vector<Row>& rows, Coll coll, int n, double copy_bw) {
  const Row* best = nullptr;
  for (const Row& r : rows) {
    if (r.coll != coll || r.backend != "shm" || r.bytes > (std::size_t{64} << 20)) continue;
    if (!best || r.bytes > best->bytes) best = &r;
  }
  if (!best || copy_bw <= 0) return "";
  const double bound_s = shm_traffic_bytes(coll, best->bytes, n) / copy_bw;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "# %s (shm): memory-bandwidth bound at %zu B: %.1f us (busiest rank moves %.0f MB "
                "at %.2f GB/s, the memcpy probe with all %d ranks copying); reached %.0f%%\n",
                to_string(coll), best->bytes, bound_s * 1e6,
                shm_traffic_bytes(coll, best->bytes, n) / 1e6, copy_bw / 1e9, n,
                100.0 * bound_s / (best->time_us * 1e-6));
  return buf;
}

}  // namespace synk::bench
