// Every SYNK_* environment variable libsynk reads, parsed in one place, once per process.
// The README lists them all; add a variable here and there together.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace synk::detail {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

struct Settings {
  std::string backend = "auto";    // SYNK_BACKEND: auto|mpi|shm|nccl
  LogLevel log_level = LogLevel::warn;  // SYNK_LOG: error|warn|info|debug
  double timeout_s = 300.0;        // SYNK_TIMEOUT: deadline of every blocking wait, seconds
  int simulate_nodes = 1;          // SYNK_SIMULATE_NODES: split each real node into k fake ones
  bool check_calls = false;        // SYNK_CHECK_CALLS: ranks compare every call before running it
  std::size_t mpi_max_chunk = 0;   // SYNK_MPI_MAX_CHUNK: elements per MPI call (0: INT_MAX)
  // SYNK_MPI_THREADS: the thread level synk asks for when it initializes MPI: multiple (calls
  // of the mpi and hier backends can run on the progress thread) or serialized (they run at
  // issue; Open MPI's small messages are about 0.1 us faster without threads).
  std::string mpi_threads = "multiple";
  std::size_t shm_slot_bytes = 0;  // SYNK_SHM_SLOT_BYTES: shm step size per rank (0: 1 MiB)
  // SYNK_SHM_CMA_BYTES: shm scatters of at least this many bytes per rank copy straight out of
  // the root's buffer (0: never; -1: the default, 1 MiB).
  long long shm_cma_bytes = -1;
  // SYNK_SHM_SPIN_US: where every shm rank has a CPU of its own, how long a waiting rank polls
  // before it starts yielding its core (-1: the default, 2000).
  long long shm_spin_us = -1;
  // SYNK_SHM_STREAM: how large shm calls write shared memory: auto (each rank times both ways
  // and keeps the faster, shm/store_tuner.h), always (non-temporal stores), never (ordinary).
  std::string shm_stream = "auto";
  // SYNK_SHM_SEGMENTS: auto (anonymous where the node's ranks can share one, else named) or
  // named (POSIX segments in /dev/shm only), backends/shm/segment_share.h.
  std::string shm_segments = "auto";
  // SYNK_SHM_ALGO: "broadcast=cma,all_gather=slots": forces the shm backend's way for those
  // collectives instead of measuring (parsed by shm::parse_forced_algos when a backend is made).
  std::string shm_algo;
  std::string contexts;            // SYNK_CONTEXTS: "name->cudaN;..." (checked by parse_contexts)
  // Set by synkrun for the NCCL backend's device choice (see backends/nccl).
  std::string gpu;                 // SYNK_GPU: the rank's GPU index(es), "2" or "2,3"; empty: none
  int launcher_local_rank = -1;    // SYNK_LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK (-1: neither)
  // SYNK_FUSION_BYTES: the largest fused collective of KeyValue and the list collectives (0:
  // every key or array on its own).
  std::size_t fusion_bytes = std::size_t{64} << 20;
  double stall_warn_s = 60.0;  // SYNK_STALL_WARN: seconds before a stalled key is reported
  // SYNK_CYCLE_MS: how long KeyValue gathers pushes before it agrees with the other ranks on
  // which keys are ready (0: at once).
  int cycle_ms = 0;
  std::string timeline;  // SYNK_TIMELINE: the Chrome trace file to write (empty: none)
};

// Parses the variables through `get` (which returns nullptr for an unset variable). One rule for
// every variable: spaces and tabs around a value are ignored, and an empty or blank value means
// the default. Throws synk::Error(InvalidArgument) naming the variable and its value (as given)
// when one is malformed.
Settings parse_settings(const std::function<const char*(const char*)>& get);

// The process's settings, read from the environment on first use and cached.
const Settings& settings();

const char* to_string(LogLevel level) noexcept;

}  // namespace synk::detail
