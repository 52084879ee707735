// See bench_membound.h.
#include "bench_membound.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backends/shm/store_tuner.h"
#include "backends/shm/stream_copy.h"
#include "bench_median.h"

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
  const double best = std::min(median(times[0]), median(times[1]));
  return 2.0 * static_cast<double>(kBytes) / best;
}

Handoff probe_handoff(MPI_Comm comm) {
  constexpr std::size_t kWords = (std::size_t{1} << 20) / sizeof(std::uint64_t);
  constexpr int kTries = 8;  // the first untimed: it faults the pages in
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int rank = 0, size = 0, world_rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &size);
  MPI_Comm_rank(comm, &world_rank);
  // The first two ranks of the node of comm's rank 0 (its rank 0 there too: the split keeps
  // comm's order); every other rank only keeps step.
  int probing = world_rank == 0 && size >= 2 ? 1 : 0;
  MPI_Bcast(&probing, 1, MPI_INT, 0, comm);
  Handoff h;
  if (!probing) {
    MPI_Comm_free(&node);
    return h;
  }
  int on_first = world_rank == 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &on_first, 1, MPI_INT, MPI_MAX, node);
  const bool writer = on_first && rank == 0, reader = on_first && rank == 1;
  std::uint64_t* words = nullptr;
  MPI_Win win;
  MPI_Win_allocate_shared(writer ? static_cast<MPI_Aint>(kWords * sizeof *words) : 0,
                          sizeof *words, MPI_INFO_NULL, node, &words, &win);
  if (reader) {
    MPI_Aint bytes = 0;
    int unit = 0;
    MPI_Win_shared_query(win, 0, &bytes, &unit, &words);
  }
  // The portable way to see another process's stores in a shared window: a passive epoch for
  // the whole probe, MPI_Win_sync on both sides of each barrier.
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  std::vector<double> writes, reads;
  bool wrong = false;
  for (int t = 0; t < kTries; ++t) {
    double times[3] = {0, 0, -1};  // the write, the read, the reader's rank in comm
    if (writer) {
      const auto t0 = Clock::now();
      // A plain loop, not memset: glibc may stream a large memset past every cache.
      for (std::size_t i = 0; i < kWords; ++i) words[i] = i + static_cast<std::size_t>(t);
      MPI_Win_sync(win);
      times[0] = since(t0);
    }
    MPI_Barrier(comm);
    MPI_Win_sync(win);
    if (reader) {
      times[2] = world_rank;
      const auto t0 = Clock::now();
      std::uint64_t sum = 0;
      for (std::size_t i = 0; i < kWords; ++i) sum += words[i];
      times[1] = since(t0);
      if (sum != kWords * (kWords - 1) / 2 + kWords * static_cast<std::size_t>(t)) wrong = true;
    }
    MPI_Allreduce(MPI_IN_PLACE, times, 3, MPI_DOUBLE, MPI_MAX, comm);
    h.reader = static_cast<int>(times[2]);
    if (t > 0) {
      writes.push_back(times[0]);
      reads.push_back(times[1]);
    }
  }
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  MPI_Comm_free(&node);
  int bad = wrong ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, comm);
  h.write_s = median(writes);
  h.read_s = median(reads);
  h.wrong = bad != 0;
  return h;
}

std::string handoff_line(const Handoff& h, const char* when) {
  if (h.write_s == 0) return "";
  if (h.wrong) return std::string("# handoff probe (") + when + "): the reader saw wrong data\n";
  char buf[240];
  std::snprintf(buf, sizeof buf,
                "# handoff probe (%s): rank 0 rewrote 1 MiB rank %d had read in %.1f us, rank %d "
                "read it in %.1f us\n",
                when, h.reader, h.write_s * 1e6, h.reader, h.read_s * 1e6);
  return buf;
}

// Only the bytes a rank must read from and write to its own buffers count: the shm slots a
// step goes through are a few MiB, reused every other step, and stay in cache, so the user
// buffers are the traffic that reaches memory. No algorithm can move less.
double shm_traffic_bytes(Coll coll, std::size_t bytes, int n) {
  const double s = static_cast<double>(bytes), per_rank = s / n;
  switch (coll) {
    case Coll::allreduce:  // read the input, write the result
    case Coll::reduce:     // the root
    case Coll::alltoall:   // read every block, write every block
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

namespace {

// The row a table's bound is for: its largest shm row up to 64 MiB, or null.
const Row* membound_row(const std::vector<Row>& rows, Coll coll) {
  const Row* best = nullptr;
  for (const Row& r : rows) {
    if (r.coll != coll || r.backend != "shm" || r.bytes > (std::size_t{64} << 20)) continue;
    if (!best || r.bytes > best->bytes) best = &r;
  }
  return best;
}

// A row that fits in the caches is not bound by memory (-e 1M gave "reached 167%").
std::size_t cache_bytes() {
  const std::size_t llc = shm::last_level_cache_bytes();
  return llc ? llc : std::size_t{32} << 20;
}

}  // namespace

bool has_membound(const std::vector<Row>& rows, Coll coll) {
  const Row* best = membound_row(rows, coll);
  return best && best->bytes >= cache_bytes();
}

std::string membound_line(const std::vector<Row>& rows, Coll coll, int n, double copy_bw) {
  const Row* best = membound_row(rows, coll);
  if (!best || copy_bw <= 0) return "";
  const std::size_t cache = cache_bytes();
  if (best->bytes < cache) {
    char note[200];
    std::snprintf(note, sizeof note,
                  "# %s (shm): no memory-bandwidth bound: the largest row (%zu B) is under the "
                  "last-level cache (%zu MiB); larger rows get one\n",
                  to_string(coll), best->bytes, cache >> 20);
    return note;
  }
  const double bound_s = shm_traffic_bytes(coll, best->bytes, n) / copy_bw;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "# %s (shm): memory-bandwidth bound at %zu B: %.1f us (the busiest rank reads and "
                "writes %.0f MB of its buffers at %.2f GB/s, the fastest copy probe so far with "
                "all %d ranks copying); reached %.0f%%\n",
                to_string(coll), best->bytes, bound_s * 1e6,
                shm_traffic_bytes(coll, best->bytes, n) / 1e6, copy_bw / 1e9, n,
                100.0 * bound_s / (best->time_us * 1e-6));
  return buf;
}

}  // namespace synk::bench
