// The memory-bandwidth bound of on-node collectives: a copy probe that every rank runs at the
// same time gives each rank's share of the machine's bandwidth, and a traffic model per
// collective gives the bytes the busiest rank must read and write. And a probe of how fast a
// slot changes hands between two ranks, which tells the host states of this machine apart.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "bench_colls.h"
#include "bench_table.h"

namespace synk::bench {

// Bytes read + written per second by one rank while all ranks of comm copy at once (64 MiB
// buffers, the slowest rank's figure; the median of 5 memcpys or of 5 streaming copies, the
// faster). Collective over comm.
double probe_copy_bandwidth(MPI_Comm comm);

// How fast a shm slot changes hands right now, between comm's rank 0 and the next rank on its
// node: rank 0 rewrites 1 MiB (ordinary stores) that the reader read the try before, then the
// reader reads it; the medians of 7 tries. The rewrite is the slot writer's cost: each line must be
// taken back from the reader's cache. On this machine (2 ranks) it takes 90-160 us while the
// vCPUs' lines cross quickly and 450-650 us while they cross slowly; the shm rows run on streaming
// stores then (store_tuner.h), and MPI's, whose input does not change, do not feel it. All
// zero where the node has one rank. Collective over comm.
struct Handoff {
  double write_s = 0, read_s = 0;
  int reader = -1;     // the reading rank, in comm
  bool wrong = false;  // the reader did not see what was written (a bug, not a state)
};
Handoff probe_handoff(MPI_Comm comm);

// "# handoff probe (when): ..." for h, or "" where it was not made.
std::string handoff_line(const Handoff& h, const char* when);

// Bytes the busiest rank must read and write of its own buffers in one call of `bytes` (the
// row's size) on n ranks: the memory traffic no algorithm avoids.
double shm_traffic_bytes(Coll coll, std::size_t bytes, int n);

// Whether membound_line gives coll's table a bound: its largest shm row up to 64 MiB is at
// least the last-level cache.
bool has_membound(const std::vector<Row>& rows, Coll coll);

// "# allreduce (shm): memory bound at 67108864 B ..." for the largest shm row of coll up to
// 64 MiB, or "" when there is none.
std::string membound_line(const std::vector<Row>& rows, Coll coll, int n, double copy_bw);

}  // namespace synk::bench
