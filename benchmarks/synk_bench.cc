// synk-bench: nccl-tests style benchmark of synk's collectives, each row timed against the raw
// MPI call with the same arguments in the same run, and checked element by element.
#include <malloc.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_check.h"
#include "bench_colls.h"
#include "bench_device.h"
#include "bench_membound.h"
#include "bench_memory.h"
#include "bench_options.h"
#include "bench_raw_nccl.h"
#include "bench_median.h"
#include "bench_table.h"
#include "synk/synk.h"

namespace synk::bench {
namespace {

// Exit codes (see the --help footer).
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// A failure every rank knows about (e.g. buffers that could not be allocated somewhere):
// rank 0 reports it and every rank exits with kExitFailure, without MPI_Abort.
class SharedFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct World {
  int rank = 0;
  int size = 1;
  bool root() const { return rank == 0; }
};

// Rank 0's output; every row is flushed at once, since big sizes take seconds.
void out(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

// A send or recv buffer: ordinary memory, or (-R 1) a node buffer from Communicator::alloc.
struct Buffer {
  std::shared_ptr<void> keep;  // what frees it
  std::byte* data = nullptr;
  std::byte* get() const { return data; }
  explicit operator bool() const { return data != nullptr; }
};

// Large buffers sit where glibc's mmap path puts an aligned_alloc(64): 64 bytes past a page's
// start. (main raises the mmap threshold, which would otherwise move them into the heap.)
constexpr std::size_t kMmapSized = std::size_t{128} << 10;
constexpr int kMmapPageOffset = 64;

// Cache-line aligned, or page_offset bytes past a page's start (-P); empty for 0 bytes or
// when memory runs out.
Buffer allocate(std::size_t bytes, int page_offset) {
  if (bytes == 0) return {};
  if (page_offset < 0 && bytes >= kMmapSized) page_offset = kMmapPageOffset;
  if (page_offset < 0) {
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) return {};
    return {std::shared_ptr<void>(p, std::free), static_cast<std::byte*>(p)};
  }
  const auto offset = static_cast<std::size_t>(page_offset);
  const std::size_t rounded = (bytes + offset + 4095) / 4096 * 4096;
  void* base = std::aligned_alloc(4096, rounded);
  if (!base) return {};
  return {std::shared_ptr<void>(base, std::free), static_cast<std::byte*>(base) + offset};
}

// -R 1: from comm.alloc (collective), page_offset bytes into its page-aligned part (-P).
Buffer allocate_node_buffer(Communicator& comm, std::size_t bytes, int page_offset) {
  const std::size_t offset = page_offset < 0 ? 0 : static_cast<std::size_t>(page_offset);
  auto nb = std::make_shared<NodeBuffer>(comm.alloc(bytes ? bytes + offset : 0));
  if (nb->empty()) return {};
  auto* data = static_cast<std::byte*>(nb->data()) + offset;
  return {std::move(nb), data};
}

// "64" for a buffer 64 bytes past a page's start.
std::string page_offset_of(const void* p) {
  return p ? std::to_string(reinterpret_cast<std::uintptr_t>(p) % 4096) : "-";
}

// A backend that could be built, and what its rows predicted for the next size under -w 0.
struct Bench {
  std::string backend;
  Communicator comm;
  double seconds_per_byte = 0;
  DeviceMirror device;  // the table's device buffers, for a backend on a device (nccl)
  std::unique_ptr<RawNccl> raw;  // --baseline nccl: the baseline column's NCCL communicator

  // The call `host` describes, on the buffers this backend's calls take.
  CallArgs args(const CallArgs& host) const { return device ? device.on_device(host) : host; }
  // After the host buffers of `host` were written: the device copies follow.
  void inputs_written(const CallArgs& host) {
    if (device) device.push(host);
  }
};

bool has_shm(const std::vector<Bench>& benches) {
  return std::any_of(benches.begin(), benches.end(),
                     [](const Bench& b) { return b.backend == "shm"; });
}

// Whether any rank failed, agreed by all (synk/agreement.h): the lowest rank that did tells its
// reason to every rank (with "rank R: " before it when R is not 0), so that none goes on alone.
std::optional<std::string> agreed_failure(bool failed, const std::string& why) {
  const std::optional<synk::RankFailure> first =
      synk::first_failure(MPI_COMM_WORLD, failed, why);
  if (!first) return std::nullopt;
  return (first->rank == 0 ? "" : "rank " + std::to_string(first->rank) + ": ") + first->text;
}

std::string command_line(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.empty() || arg.find_first_of(" \t'\"$*?") != std::string::npos) arg = "'" + arg + "'";
    line += (i ? " " : "") + arg;
  }
  return line;
}

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, static_cast<std::size_t>(len));
  s = s.substr(0, s.find_first_of("\n,"));
  return s;
}

// The thread level MPI gave (--mpi-threads asks for one).
const char* thread_level_name() {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  switch (level) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    default: return "multiple";
  }
}

// "# cpu: <model>, 2 CPUs online, load average 0.52 at the start", and a note where the node's
// ranks outnumber its CPUs: what decides the figures, written down beside them.
std::string host_lines(const Communicator& comm) {
  std::string model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    if (const auto colon = line.find(':'); colon != std::string::npos) {
      model = line.substr(std::min(colon + 2, line.size()));
    }
    break;
  }
  std::string load = "unknown";
  std::ifstream("/proc/loadavg") >> load;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  std::string text = "# cpu: " + model + ", " + std::to_string(cpus) +
                     " CPUs online, load average " + load + " at the start\n";
  if (cpus > 0 && comm.local_size() > cpus) {
    text += "# note: " + std::to_string(comm.local_size()) + " ranks share this node's " +
            std::to_string(cpus) + " CPUs: a rank waits for a core, and the times show it\n";
  }
  return text;
}

// "# mpi transports: OMPI_MCA_btl=tcp,self": the Open MPI transport and collective settings in
// the environment, which decide the MPI column (a TCP-only container's MPI is several times
// slower than its shared-memory transport; synk's shm backend is not). mpirun's own settings
// for the ranks (their session, synkrun's shared-memory folder) are left out; "" where none.
std::string mpi_settings_line() {
  std::vector<std::string> set;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const bool transport = kv.rfind("OMPI_MCA_btl", 0) == 0 || kv.rfind("OMPI_MCA_pml", 0) == 0 ||
                           kv.rfind("OMPI_MCA_mtl", 0) == 0 || kv.rfind("OMPI_MCA_coll", 0) == 0;
    if (transport && kv.find("_backing_directory=") == std::string::npos) set.push_back(kv);
  }
  if (set.empty()) return "";
  std::sort(set.begin(), set.end());
  std::string line = "# mpi transports:";
  for (const std::string& s : set) line += " " + s;
  return line + "\n";
}

void print_header(const World& w, const Options& o, Communicator& comm, int argc, char** argv) {
  struct RankInfo {
    int pid;
    int node;
    char host[64];
  };
  RankInfo mine{static_cast<int>(getpid()), comm.node(), {}};
  gethostname(mine.host, sizeof mine.host - 1);
  std::vector<RankInfo> all(w.root() ? static_cast<std::size_t>(w.size) : 0);
  MPI_Gather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (!w.root()) return;
  std::string backends;
  for (const std::string& b : o.backends) backends += (backends.empty() ? "" : ",") + b;
  char buf[512];
  std::string text = "# synk-bench: synk " SYNK_VERSION_STRING ", " + mpi_library() + "\n";
  std::snprintf(buf, sizeof buf, "# ranks %d, nodes %d, host %s\n", w.size, comm.num_nodes(),
                all[0].host);
  text += buf;
  text += host_lines(comm);
  text += mpi_settings_line();
  text += "# command: " + command_line(argc, argv) + "\n";
  std::snprintf(buf, sizeof buf,
                "# minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d settle iters: %d "
                "iters: %d rounds: %d validation: %d fresh: %d page offset: %s node buffers: %d "
                "nonblocking: %d in place: %d mpi threads: %s dtype: %s op: %s root: %d "
                "backend: %s\n",
                o.min_bytes, o.max_bytes, o.factor, o.warmup, o.settle, o.iters, kRounds,
                o.check ? 1 : 0, o.fresh ? 1 : 0,
                o.page_offset < 0 ? "default" : std::to_string(o.page_offset).c_str(),
                o.node_buffers ? 1 : 0, o.nonblocking ? 1 : 0, o.in_place ? 1 : 0,
                thread_level_name(),
                to_string(o.dtype), to_string(o.op), o.root, backends.c_str());
  text += buf;
  text += "#\n# Using ranks\n";
  for (int r = 0; r < w.size; ++r) {
    const RankInfo& ri = all[static_cast<std::size_t>(r)];
    std::snprintf(buf, sizeof buf, "#  Rank %3d Pid %7d on %s (node %d)\n", r, ri.pid, ri.host,
                  ri.node);
    text += buf;
  }
  out(text);
}

struct Timing {
  double synk_s = 0;
  std::optional<double> base_s;   // the baseline's (MPI's, or raw NCCL's)
  std::optional<double> speedup;  // the median over rounds of baseline / synk, round by round
  int iters = 0;
};

// -S: more untimed calls per side after the warmup, as many as kSettleSeconds allow at the
// warmup's pace (every rank alike: per_call is the maximum over the ranks).
template <class TimeCalls>
void settle_row(const Options& o, double per_call, bool with_base, const TimeCalls& time_calls) {
  if (per_call <= 0) return;  // -w 0 on the first row: nothing says what settling would take
  const int n = std::min(o.settle, static_cast<int>(kSettleSeconds / per_call));
  if (n <= 0) return;
  time_calls(true, n);
  if (with_base) time_calls(false, n);
}

// Warmup, then kRounds rounds of `iters` synk calls and `iters` baseline calls (MPI's, or raw
// NCCL's on synk's device buffers); see --help.
// predicted_s (per call, 0 if unknown) sets the cap when there is no warmup to measure.
Timing time_row(Bench& b, const CallArgs& a, const Options& o, double predicted_s) {
  const bool with_base = b.raw || mpi_has_baseline(a);
  const MPI_Comm mc = b.comm.mpi_comm();
  const int rank = b.comm.rank();
  const CallArgs synk_args = b.args(a);
  const auto call = [&](bool synk_side) {
    if (synk_side) {
      call_synk(b.comm, synk_args);
    } else if (b.raw) {
      b.raw->call(synk_args);
    } else {
      call_mpi(mc, a);
    }
  };
  const auto time_calls = [&](bool synk_side, int calls) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (!o.fresh) {
      const double t0 = MPI_Wtime();
      for (int i = 0; i < calls; ++i) call(synk_side);
      return (MPI_Wtime() - t0) / calls;
    }
    double total = 0;  // the calls only, not the rewrites between them
    for (int i = 0; i < calls; ++i) {
      refill_input(a, rank, static_cast<unsigned char>(i % 2 ? 0x3c : 0x3d));
      // The device copies serve synk's side and a raw NCCL baseline alike.
      if (synk_side || b.raw) b.inputs_written(a);
      // Every rank starts the call once all have rewritten their input: a broadcast's or a
      // scatter's readers, who rewrite nothing, timed the root's rewrite inside their call.
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      call(synk_side);
      total += MPI_Wtime() - t0;
    }
    return total / calls;
  };

  double estimate[2] = {predicted_s, predicted_s};
  if (o.warmup > 0) {
    estimate[0] = time_calls(true, o.warmup);
    estimate[1] = with_base ? time_calls(false, o.warmup) : 0;
    MPI_Allreduce(MPI_IN_PLACE, estimate, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }
  const double per_call = std::max(estimate[0], estimate[1]);
  settle_row(o, per_call, with_base, time_calls);
  Timing t;
  t.iters = o.iters;
  if (per_call * kRounds * o.iters > kRowBudgetSeconds) {
    t.iters = std::max(1, static_cast<int>(kRowBudgetSeconds / (per_call * kRounds)));
  }

  // Round r times both sides back to back, in alternating order, so that each pair sees the
  // same machine: on a shared host the cores' speed, and whether two of them share a
  // cache, changes from one second to the next; the pair's ratio cancels most of that.
  std::vector<double> rounds(2 * kRounds, 0.0);  // synk's, then the baseline's
  for (int r = 0; r < kRounds; ++r) {
    const bool synk_first = r % 2 == 0;
    const std::size_t base = static_cast<std::size_t>(kRounds + r);
    if (with_base && !synk_first) rounds[base] = time_calls(false, t.iters);
    rounds[static_cast<std::size_t>(r)] = time_calls(true, t.iters);
    if (with_base && synk_first) rounds[base] = time_calls(false, t.iters);
  }
  MPI_Allreduce(MPI_IN_PLACE, rounds.data(), 2 * kRounds, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  t.synk_s = median({rounds.begin(), rounds.begin() + kRounds});
  if (with_base) {
    t.base_s = median({rounds.begin() + kRounds, rounds.end()});
    std::vector<double> ratios;
    for (int r = 0; r < kRounds; ++r) {
      ratios.push_back(rounds[static_cast<std::size_t>(kRounds + r)] /
                       rounds[static_cast<std::size_t>(r)]);
    }
    t.speedup = median(ratios);
  }
  return t;
}

// The largest send and recv a table of `coll` needs.
void buffer_bytes(const World& w, const Options& o, Coll coll, std::size_t* send_bytes,
                  std::size_t* recv_bytes) {
  for (std::size_t s : size_steps(o)) {
    const Layout l = make_layout(coll, s, o.dtype, w.size);
    *send_bytes = std::max(*send_bytes, l.send_bytes);
    *recv_bytes = std::max(*recv_bytes, l.recv_bytes);
  }
}

struct Buffers {
  Buffer send, recv;
};

// -R 1: one send and one recv node buffer for every table, from the shm communicator (the
// other backends use them as any memory). Once: a node buffer lives as long as its
// communicator.
Buffers make_node_buffers(const World& w, const Options& o, std::vector<Bench>& benches) {
  std::size_t send_bytes = 0, recv_bytes = 0;
  for (Coll c : o.colls) buffer_bytes(w, o, c, &send_bytes, &recv_bytes);
  Communicator* owner = &benches.front().comm;
  for (Bench& b : benches) {
    if (b.backend == "shm") owner = &b.comm;
  }
  return {allocate_node_buffer(*owner, send_bytes, o.page_offset),
          allocate_node_buffer(*owner, recv_bytes, o.page_offset)};
}

// The host bytes one rank's send and recv buffers take at once: the largest table's, or with
// -R 1 the largest send and the largest recv of all the tables, held throughout.
std::uint64_t host_bytes_per_rank(const World& w, const Options& o) {
  // Saturating, as -e takes sizes up to 2^64 - 1.
  const auto plus = [](std::uint64_t a, std::uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
  };
  std::uint64_t send = 0, recv = 0, table = 0;
  for (Coll c : o.colls) {
    std::size_t s = 0, r = 0;
    buffer_bytes(w, o, c, &s, &r);
    send = std::max<std::uint64_t>(send, s);
    recv = std::max<std::uint64_t>(recv, r);
    table = std::max(table, plus(s, r));
  }
  return o.node_buffers ? plus(send, recv) : table;
}

// Refuses, on every rank, sizes whose host buffers would not fit in a node's memory with those
// of the node's other ranks, rather than leave the OOM killer to end the job with no word.
void check_host_memory(const World& w, const Options& o) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node);
  int ranks_on_node = 1;
  MPI_Comm_size(node, &ranks_on_node);
  MPI_Comm_free(&node);
  const std::string why =
      memory_shortfall(host_bytes_per_rank(w, o), ranks_on_node, available_memory());
  const std::optional<std::string> first = agreed_failure(!why.empty(), why);
  if (!first) return;
  throw UsageError(*first + "; lower -e (now " + std::to_string(o.max_bytes) +
                   "), or run fewer ranks on a node");
}

// The table's send and recv buffers (node_buffers' where given: -R 1), and a device mirror of
// them for each bench on a device. A failure on any rank is a SharedFailure on every rank.
std::pair<Buffer, Buffer> table_buffers(const World& w, const Options& o, Coll coll,
                                        std::vector<Bench>& benches,
                                        const Buffers* node_buffers) {
  std::size_t send_bytes = 0, recv_bytes = 0;
  buffer_bytes(w, o, coll, &send_bytes, &recv_bytes);
  Buffer send, recv;
  if (node_buffers) {
    send = node_buffers->send;
    recv = node_buffers->recv;
  } else {
    send = allocate(send_bytes, o.page_offset);
    recv = allocate(recv_bytes, o.page_offset);
  }
  int failed = (send_bytes && !send) || (recv_bytes && !recv);
  std::string device_error;
  for (Bench& b : benches) {
    if (b.comm.device() < 0) continue;
    try {
      b.device = DeviceMirror();  // the last table's first
      b.device = DeviceMirror(b.comm.device(), send_bytes, recv_bytes);
    } catch (const Error& e) {
      failed = 1;
      device_error = e.what();
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed) {
    if (!device_error.empty()) {
      std::fprintf(stderr, "synk-bench: rank %d: %s\n", w.rank, device_error.c_str());
    }
    throw SharedFailure(std::string(to_string(coll)) + ": cannot allocate " +
                        std::to_string(send_bytes) + " + " + std::to_string(recv_bytes) +
                        " bytes of buffers (host, and device for nccl) on some rank");
  }
  return {std::move(send), std::move(recv)};
}

// Rank 0's lines above a table: what it runs, where the buffers start, the handoff probe.
void print_table_head(const World& w, const Options& o, Coll coll, const void* send,
                      const void* recv, const Handoff& handoff_before) {
  if (!w.root()) return;
  std::string what = std::string("#\n# ") + to_string(coll) + ": " + to_string(o.dtype);
  if (uses_op(coll)) what += std::string(" ") + to_string(o.op);
  if (has_root(coll)) what += ", root " + std::to_string(o.root);
  what += ", " + std::to_string(w.size) + " ranks; rank 0's buffers start " +
          page_offset_of(send) + " (send) and " + page_offset_of(recv) +
          " (recv) bytes into a page";
  out(what + "\n" + handoff_line(handoff_before, "before the table") +
      table_header(o.baseline));
}

// One row: `b`'s call of `a` timed beside the baseline, then checked (-c 1), and printed by
// rank 0.
Row run_row(const World& w, const Options& o, Bench& b, const CallArgs& a) {
  fill_buffers(a, w.rank, w.size, kTimedSeed);
  b.inputs_written(a);
  const double predicted = b.seconds_per_byte * static_cast<double>(a.layout.bytes);
  const Timing t = time_row(b, a, o, predicted);
  b.seconds_per_byte =
      std::max(t.synk_s, t.base_s.value_or(0)) / static_cast<double>(a.layout.bytes);

  Row row;
  row.coll = a.coll;
  row.bytes = a.layout.bytes;
  row.count = a.layout.count;
  row.dtype = o.dtype;
  if (uses_op(a.coll)) row.op = o.op;
  row.root = has_root(a.coll) ? o.root : -1;
  row.backend = b.backend;
  row.ranks = w.size;
  row.in_place = o.in_place;
  row.nonblocking = o.nonblocking;
  row.fresh = o.fresh;
  row.node_buffers = o.node_buffers;
  row.time_us = t.synk_s * 1e6;
  row.algbw = static_cast<double>(a.layout.bytes) / t.synk_s / 1e9;
  row.busbw = row.algbw * busbw_factor(a.coll, w.size);
  row.baseline = o.baseline;
  if (t.base_s) {
    row.base_time_us = *t.base_s * 1e6;
    row.speedup = *t.speedup;
  }
  if (o.check) {
    fill_buffers(a, w.rank, w.size, kCheckSeed);
    b.inputs_written(a);
    call_synk(b.comm, b.args(a));
    if (b.device) b.device.pull_result(a, w.rank);
    std::uint64_t wrong = count_wrong(a, w.rank, w.size, kCheckSeed);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    row.wrong = wrong;
  }
  if (w.root()) {
    if (t.iters < o.iters) {
      out("# note: " + std::to_string(a.layout.bytes) + " B (" + b.backend + "): " +
          std::to_string(t.iters) + (t.iters == 1 ? " call" : " calls") + " per round instead of " +
          std::to_string(o.iters) + ", to keep each side of the row near " +
          std::to_string(static_cast<int>(kRowBudgetSeconds)) + " s\n");
    }
    out(format_row(row));
  }
  return row;
}

// Rank 0's lines below a table: a note where no size made a row, each backend's summary, the
// copy probe and the memory bound, the handoff probe after it.
void print_table_foot(const World& w, const Options& o, Coll coll,
                      const std::vector<Bench>& benches, const std::vector<Row>& rows,
                      double probe_after, double copy_bw, const Handoff& handoff_after) {
  if (!w.root()) return;
  const bool any_row =
      std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.coll == coll; });
  if (!any_row) {
    const std::size_t per_rank = is_blocked(coll) ? static_cast<std::size_t>(w.size) : 1;
    out("# note: no row: every size from " + std::to_string(o.min_bytes) + " to " +
        std::to_string(o.max_bytes) + " B is under " + std::to_string(per_rank) + " " +
        to_string(o.dtype) + " element" + (per_rank == 1 ? "" : "s (one per rank)") +
        "; give a larger -e\n");
  }
  for (const Bench& b : benches) out(summary_line(rows, coll, b.backend));
  if (probe_after > 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "# copy probe (after the table): %.2f GB/s per rank; the bound below uses "
                  "the fastest so far, %.2f\n",
                  probe_after / 1e9, copy_bw / 1e9);
    out(buf);
  }
  out(membound_line(rows, coll, w.size, copy_bw));
  out(handoff_line(handoff_after, "after the table"));
}

// One table: every size, one row per backend. Appends to rows; returns the #wrong total.
// node_buffers: the -R 1 buffers (else null: ordinary ones of the table's sizes).
// copy_bw: the fastest copy probe so far (0: none); a probe after the table may raise it.
std::uint64_t run_coll(const World& w, const Options& o, Coll coll, std::vector<Bench>& benches,
                       std::vector<Row>& rows, double& copy_bw, const Buffers* node_buffers) {
  const auto [send, recv] = table_buffers(w, o, coll, benches, node_buffers);
  // Whether slots change hands quickly right now: the shm rows run on ordinary stores when
  // they do and on streaming ones when they do not (store_tuner.h), and MPI's do not care.
  const bool shm = has_shm(benches);
  const Handoff handoff_before = shm ? probe_handoff(MPI_COMM_WORLD) : Handoff{};
  print_table_head(w, o, coll, send.get(), recv.get(), handoff_before);
  std::uint64_t total_wrong = 0;
  std::size_t rows_made = 0, largest_skipped = 0;
  for (std::size_t s : size_steps(o)) {
    const CallArgs a{coll,       make_layout(coll, s, o.dtype, w.size), o.dtype, o.op, o.root,
                     send.get(), recv.get(),  o.nonblocking, o.in_place};
    if (a.layout.count == 0) {
      largest_skipped = s;
      continue;
    }
    for (Bench& b : benches) {
      rows.push_back(run_row(w, o, b, a));
      total_wrong += rows.back().wrong.value_or(0);
      ++rows_made;
    }
  }
  if (w.root() && rows_made > 0 && largest_skipped > 0) {  // (no row at all: the foot says so)
    out("# note: sizes up to " + std::to_string(largest_skipped) + " B are under one " +
        to_string(o.dtype) + " per rank: no row for them\n");
  }
  const Handoff handoff_after = shm ? probe_handoff(MPI_COMM_WORLD) : Handoff{};
  total_wrong += (handoff_before.wrong ? 1 : 0) + (handoff_after.wrong ? 1 : 0);
  // The bound uses the fastest copy probe of the run so far: one probe taken while the host
  // ran slowly made it too easy (docs/measurements.md#the-copy-probe-and-the-memory-bound).
  double probe_after = 0;
  if (shm && copy_bw > 0 && has_membound(rows, coll)) {
    probe_after = probe_copy_bandwidth(MPI_COMM_WORLD);
    copy_bw = std::max(copy_bw, probe_after);
  }
  print_table_foot(w, o, coll, benches, rows, probe_after, copy_bw, handoff_after);
  return total_wrong;
}

// --baseline nccl: the raw NCCL communicator beside synk's, on the same device. A failure on any
// rank is a SharedFailure on every rank.
std::unique_ptr<RawNccl> make_raw_nccl(int device) {
  std::unique_ptr<RawNccl> raw;
  std::string why;
  try {
    raw = RawNccl::create(MPI_COMM_WORLD, device);
  } catch (const std::exception& e) {
    why = e.what();
  }
  const std::optional<std::string> first = agreed_failure(raw == nullptr, why);
  if (first) throw SharedFailure("--baseline nccl: " + *first);
  return raw;
}

// Constructs a communicator per requested backend. A backend that cannot run here (not in the
// build, no device, two ranks on one GPU) is a usage error unless --backend all, which notes it
// and goes on; any other failure is a SharedFailure either way. The ranks agree, so that none
// goes on with a backend another rank lacks.
std::vector<Bench> make_benches(const Options& o, std::vector<std::string>& notes) {
  std::vector<Bench> benches;
  for (const std::string& name : o.backends) {
    std::string why;
    int failed = 0, fatal = 0;
    try {
      // hier is what auto (and shm) make of ranks on several nodes; nothing asks for it by
      // name. A row of each would time the same backend twice.
      Communicator comm(MPI_COMM_WORLD, CommOptions{name == "hier" ? "auto" : name});
      if (name == "hier" && comm.backend() != "hier") {
        throw Error(ErrorCode::NotSupported, "the ranks are on one node (auto picks " +
                                                 comm.backend() + " for them)");
      }
      if (name == "shm" && comm.backend() != "shm") {
        throw Error(ErrorCode::NotSupported,
                    "the ranks are on several nodes, where shm makes " + comm.backend());
      }
      const bool reduces = std::any_of(o.colls.begin(), o.colls.end(), uses_op);
      if (name == "nccl" && reduces &&
          (o.dtype == DataType::int16 || o.dtype == DataType::uint16)) {
        throw Error(ErrorCode::NotSupported, std::string("NCCL has no ") + to_string(o.dtype) +
                                                 " reduction (allreduce, reduce, reduce_scatter)");
      }
      benches.push_back(Bench{name, std::move(comm), 0, {}, nullptr});
    } catch (const Error& e) {
      why = e.what();
      failed = 1;
      fatal = e.code() != ErrorCode::NotSupported && e.code() != ErrorCode::InvalidUsage &&
              e.code() != ErrorCode::Remote;
    }
    // The lowest rank that failed tells its reason to all; a fatal failure anywhere is fatal.
    const std::optional<std::string> first = agreed_failure(failed != 0, why);
    MPI_Allreduce(MPI_IN_PLACE, &fatal, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (first) {
      why = *first;
      if (!failed) benches.pop_back();
      if (fatal) throw SharedFailure("backend " + name + ": " + why);
      if (!o.backend_all) throw UsageError("backend " + name + ": " + why);
      notes.push_back("# backend " + name + ": not available: " + why + "\n");
      continue;
    }
    Bench& b = benches.back();
    if (b.comm.device() >= 0) {
      // Printed by rank 0, so its device.
      notes.push_back("# backend " + name + ": synk's calls on device buffers (rank 0: cuda" +
                      std::to_string(b.comm.device()) +
                      "), copied from and to host ones outside the timing; " +
                      (o.baseline == "nccl"
                           ? "its nccl(us) column is the raw NCCL call on the same device "
                             "buffers, on an NCCL communicator of its own\n"
                           : "its mpi(us) column is the MPI call on the host buffers\n"));
    }
    if (o.baseline == "nccl") b.raw = make_raw_nccl(b.comm.device());
  }
  if (benches.empty()) throw UsageError("none of the backends mpi, shm, hier, nccl is available");
  return benches;
}

// Rank 0 checks that the --json file can be written, before any time is spent; an existing file
// stays as it is until the rows replace it (a run stopped by Ctrl-C left it empty).
void check_json_file(const World& w, const Options& o) {
  if (o.json_file.empty()) return;
  int ok = 1;
  if (w.root()) {
    std::error_code ec;
    const bool existed = std::filesystem::exists(o.json_file, ec);
    ok = std::ofstream(o.json_file, std::ios::app).good() ? 1 : 0;
    if (ok && !existed) std::filesystem::remove(o.json_file, ec);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) throw UsageError("--json: cannot write '" + o.json_file + "'");
}

// The shm rows get a memory-bandwidth bound from a copy probe made in this same run: the first
// before the tables (0 without shm rows).
double first_copy_probe(const World& w, const std::vector<Bench>& benches) {
  if (!has_shm(benches)) return 0;
  const double copy_bw = probe_copy_bandwidth(MPI_COMM_WORLD);
  if (w.root()) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "# copy probe: %.2f GB/s per rank (read + write counted, %d ranks at "
                  "once, the faster of memcpy and a streaming copy)\n",
                  copy_bw / 1e9, w.size);
    out(buf);
  }
  return copy_bw;
}

// Rank 0's last lines (the #wrong total, the time taken) and the --json file: false where the
// file could not be written. Every collective is done, so rank 0 can fail alone, without
// MPI_Abort.
bool finish_run(const Options& o, const std::vector<Row>& rows, std::uint64_t wrong,
                std::chrono::steady_clock::time_point start) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string end = "#\n";
  if (o.check) {
    end += "# #wrong total: " + std::to_string(wrong) + (wrong ? " FAILED\n" : " OK\n");
  } else {
    end += "# #wrong: not checked (-c 0)\n";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "# elapsed: %.1f s\n", elapsed);
  out(end + buf);
  if (o.json_file.empty()) return true;
  try {
    write_json(o.json_file, rows);
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "synk-bench: %s\n", e.what());
    return false;
  }
  return true;
}

int run(const World& w, int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();
  Options o;
  std::vector<Bench> benches;
  std::vector<std::string> notes;
  try {
    o = parse_options(argc, argv);
    if (o.help) {
      if (w.root()) out(o.help_text);
      return 0;
    }
    check_against_ranks(o, w.size);
    check_json_file(w, o);
    check_host_memory(w, o);
    benches = make_benches(o, notes);
  } catch (const UsageError& e) {
    if (w.root()) std::fprintf(stderr, "synk-bench: %s\n", e.what());
    return kExitUsage;
  } catch (const SharedFailure& e) {
    if (w.root()) std::fprintf(stderr, "synk-bench: %s\n", e.what());
    return kExitFailure;
  }

  print_header(w, o, benches.front().comm, argc, argv);
  if (w.root()) {
    for (const std::string& n : notes) out(n);
  }
  double copy_bw = first_copy_probe(w, benches);
  std::vector<Row> rows;
  std::uint64_t wrong = 0;
  try {
    Buffers node_buffers;
    if (o.node_buffers) node_buffers = make_node_buffers(w, o, benches);
    for (Coll c : o.colls) {
      wrong += run_coll(w, o, c, benches, rows, copy_bw, o.node_buffers ? &node_buffers : nullptr);
    }
  } catch (const SharedFailure& e) {
    if (w.root()) std::fprintf(stderr, "synk-bench: %s\n", e.what());
    return kExitFailure;
  }

  if (w.root() && !finish_run(o, rows, wrong, start)) return kExitFailure;
  if (rows.empty()) {
    if (w.root()) {
      std::fprintf(stderr, "synk-bench: no row measured: -e is too small (see the notes)\n");
    }
    return kExitUsage;
  }
  return wrong ? kExitFailure : 0;
}

}  // namespace
}  // namespace synk::bench

int main(int argc, char** argv) {
  // Heap memory freed is kept for the next allocation, as in a program that has run a while:
  // else the MPI column's temporary buffers (Open MPI's reduce_scatter allocates one each call)
  // went to mmap and back at every call (docs/measurements.md, the MPI column's heap).
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // MPI starts first so that only rank 0 prints, even for a bad command line.
  if (synk::bench::wants_mpi_threads(argc, argv)) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  synk::bench::World w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  int code = 0;
  try {
    code = synk::bench::run(w, argc, argv);
  } catch (const std::exception& e) {
    // A failure on one rank would leave the others waiting in a collective.
    std::fprintf(stderr, "synk-bench: rank %d: %s\n", w.rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}
