// The memory-bandwidth bound of on-node collectives: a copy probe that every rank runs at the
// same time gives each rank's share of the machine's bandwidth, and a traffic model per
// collective gives the bytes the busiest rank must read and write.
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

// Bytes the busiest rank must read and write of its own buffers in one call of `bytes` (the
// row's size) on n ranks: the memory traffic no algorithm avoids.
double shm_traffic_bytes(Coll coll, std::size_t bytes, int n);

// "# allreduce (shm): memory bound at 67108864 B ..." for the largest shm row of coll up to
// 64 MiB, or "" when there is none.
std::string membound_line(const std::vector<Row>& rows, Coll coll, int n, double copy_bw);

}  // namespace synk::bench
