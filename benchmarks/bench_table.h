// synk-bench's output: the nccl-tests style table rank 0 prints, its summary lines, and the
// same rows as JSON (--json).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_colls.h"

namespace synk::bench {

struct Row {
  Coll coll = Coll::allreduce;
  std::size_t bytes = 0;
  std::size_t count = 0;
  DataType dtype = DataType::float32;
  std::optional<ReduceOp> op;  // none for data movement
  int root = -1;               // -1 for collectives without a root
  std::string backend;
  double time_us = 0;
  double algbw = 0;                    // GB/s
  double busbw = 0;                    // GB/s
  std::optional<std::uint64_t> wrong;  // none with -c 0
  std::string baseline = "mpi";        // what base_time_us timed: "mpi" or "nccl"
  std::optional<double> base_time_us;  // none where the baseline has no such call
  std::optional<double> speedup;
  // How the row was made, for the JSON: the ranks and the flags that change what is timed.
  int ranks = 0;
  bool in_place = false;     // -I 1
  bool nonblocking = false;  // -N 1
  bool fresh = false;        // -F 1
  bool node_buffers = false; // -R 1
};

// The line of column names of a collective's table; the baseline column is "<baseline>(us)".
std::string table_header(const std::string& baseline);
std::string format_row(const Row& r);
// "# allreduce (mpi): avg busbw ..." over the rows of one collective and backend; empty when
// there are none.
std::string summary_line(const std::vector<Row>& rows, Coll coll, const std::string& backend);

// Writes rows as a JSON list of objects; throws std::runtime_error when the file cannot be
// written.
void write_json(const std::string& file, const std::vector<Row>& rows);

}  // namespace synk::bench
