// synk-bench's command line: the options, their defaults, and the checks that turn bad input
// into one-line errors (UsageError) before any collective runs.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_colls.h"
#include "synk/types.h"

namespace synk::bench {

// Bad command-line input: printed as one line on rank 0, exit code 2 on every rank.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::vector<Coll> colls;  // in the order they run
  std::string coll_name;    // as typed: "all", "allreduce", ...
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t factor = 2;
  int iters = 20;
  int warmup = 5;
  // -S: untimed calls per side after the warmup, within kSettleSeconds a side: the shm
  // backend chooses its algorithm for a size by measuring calls 65-128 (algo_chooser.h).
  int settle = 155;
  DataType dtype = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  bool check = true;
  bool fresh = false;  // -F 1: new input before every timed call
  int page_offset = -1;  // -P: every buffer this many bytes past a page's start; -1: as allocated
  bool node_buffers = false;  // -R 1: buffers from Communicator::alloc
  bool nonblocking = false;   // -N 1: synk's non-blocking calls, each waited for at once
  bool in_place = false;      // -I 1: every call in place (NCCL's and MPI's conventions)
  // --mpi-threads: the thread level MPI is initialized with, both sides alike (read before
  // MPI_Init by wants_mpi_threads): single, as a plain MPI program's, or multiple.
  std::string mpi_threads = "single";
  std::vector<std::string> backends;  // "mpi", "shm", "nccl"
  bool backend_all = false;           // --backend all: skip the ones that cannot be built
  std::string baseline = "mpi";       // "mpi", or "nccl" (raw NCCL, with --backend nccl only)
  std::string json_file;              // empty: no JSON
  bool help = false;                  // --help was asked for; help_text holds it
  std::string help_text;
};

// Rounds per row and the time budget per side of a row; see the --help footer.
inline constexpr int kRounds = 9;
inline constexpr double kRowBudgetSeconds = 2.0;
inline constexpr double kSettleSeconds = 0.25;

// Parses argv. Throws UsageError with a one-line message for bad input. Checks that need the
// number of ranks (the root) are done by check_against_ranks.
Options parse_options(int argc, char** argv);
void check_against_ranks(const Options& o, int nranks);

// Whether argv asks for --mpi-threads multiple: looked for before MPI_Init, which must know
// it; parse_options checks the value.
bool wants_mpi_threads(int argc, char** argv);

// "8", "512K", "64M", "1G", "1T" (powers of 1024, either case) -> bytes; throws UsageError.
std::size_t parse_size(const std::string& text, const char* what);

// The byte sizes the run steps through: min, min*f, ... up to max.
std::vector<std::size_t> size_steps(const Options& o);

}  // namespace synk::bench
