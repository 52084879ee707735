// See bench_membound.h.
#include "bench_membound.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backends/shm/stream_copy.h"

namespace synk::bench {

double probe_copy_bandwidth(MPI_Comm comm) {
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  std::vector<unsigned char> a(kBytes, 1), b(kBytes, 2);
  std::memcpy(b.data(), a.data(), kBytes);  // warm-up: pages touched
  // memcpy (which, at this size, may or may not stream: glibc decides from the cache size
  // cpuid reports) and synk's own streaming copy, alternating; the faster one's median.
  std::vector<double> times[2];
  for (int rep = 0; rep < 10; ++rep) {
    unsigned char* dst = rep % 4 < 2 ? a.data() : b.data();
    const unsigned char* src = rep % 4 < 2 ? b.data() : a.data();
    MPI_Barrier(comm);
    const auto t0 = std::chrono::steady_clock::now();
    if (rep % 2) {
      shm::stream_copy(dst, src, kBytes);
    } else {
      std::memcpy(dst, src, kBytes);
    }
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
    times[rep % 2].push_back(t);
  }
  for (auto& v : times) std::sort(v.begin(), v.end());
  const double best = std::min(times[0][times[0].size() / 2], times[1][times[1].size() / 2]);
  return 2.0 * static_cast<double>(kBytes) / best;
}

// Only the bytes a rank must read from and write to its own buffers count: the shm slots a
// step goes through are a few MiB, reused every other step, and stay in cache, so the user
// buffers are the traffic that reaches memory. No algorithm can move less.
double shm_traffic_bytes(Coll coll, std::size_t bytes, int n) {
  const double s = static_cast<double>(bytes), per_rank = s / n;
  switch (coll) {
    case Coll::allreduce:  // read the input, write the result
    case Coll::reduce:     // the root
      return 2 * s;
    case Coll::broadcast:  // the root reads, the others write
      return s;
    case Coll::allgather:  // read own block, write every block
    case Coll::gather:     // the root
      return per_rank + s;
    case Coll::reduce_scatter:  // read every block, write own
    case Coll::scatter:         // the root reads every block, each rank writes its own
      return s + per_rank;
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
                "# %s (shm): memory-bandwidth bound at %zu B: %.1f us (the busiest rank reads and "
                "writes %.0f MB of its buffers at %.2f GB/s, the copy probe with all %d ranks "
                "copying); reached %.0f%%\n",
                to_string(coll), best->bytes, bound_s * 1e6,
                shm_traffic_bytes(coll, best->bytes, n) / 1e6, copy_bw / 1e9, n,
                100.0 * bound_s / (best->time_us * 1e-6));
  return buf;
}

}  // namespace synk::bench
