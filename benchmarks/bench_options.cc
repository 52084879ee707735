// See bench_options.h. CLI11 parses; the checks after it give the one-line errors.
#include "bench_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <iterator>
#include <limits>
#include <set>
#include <sstream>

#include "synk/version.h"

namespace synk::bench {

namespace {

const char kFooter[] = R"(Sizes:
  size(B) describes the whole buffer, as in nccl-tests: for allgather, gather, scatter and
  reduce_scatter the gathered (or scattered) buffer of all ranks, for alltoall each rank's
  send (and recv) buffer. count does too, so each rank contributes or receives count/ranks
  elements (alltoall: to and from each rank; nccl-tests' count column is one rank's part for
  those). A size is rounded down to whole elements (and to a multiple of the number of ranks
  for those five); a size too small for one element per rank is skipped.

Timing (per row):
  WARMUP untimed calls of synk, then WARMUP of MPI. Then 9 rounds; each round times ITERS
  calls of synk and ITERS calls of MPI back to back (a barrier before each), synk first in
  the odd rounds and MPI first in the even ones. A round's per-call time is the maximum over
  ranks (nccl-tests averages over ranks and calls); time(us) and mpi(us) are the medians over
  the 9 rounds, and speedup is the median over the rounds of each round's mpi/synk ratio (on
  a shared host the cores' speed, and whether two of them share a cache, changes from one
  second to the next; the two halves of a round mostly see the same machine).
  The checked call (-c 1) gets other inputs than the timed calls, so a result left from an
  earlier call counts as wrong.
  algbw = size / time, busbw = algbw * factor (nccl-tests' PERFORMANCE.md): allreduce
  2(n-1)/n; allgather, reduce_scatter, gather, scatter and alltoall (n-1)/n; broadcast and
  reduce 1.
  Cap: when the warmup (or, with -w 0, the previous row scaled by size) predicts that one side
  of a row would take more than about 2 s, that row uses fewer calls per round (at least 1)
  and a '# note:' line says so.
  With -F 1 every rank rewrites its input (the root's, for broadcast and scatter) before each
  call, and only the calls are timed. Without it the input never changes, and a single-copy
  path that reads a peer's buffer in place (Open MPI's CMA) finds it in cache after the first
  call, which real work, with new data every step, does not give it.

  Heap: freed memory stays in the process's heap for its next allocation, as in a program
  that has run a while (glibc's M_MMAP_THRESHOLD 256 MiB, M_TRIM_THRESHOLD 1 GiB); buffers of
  128 KiB or more still start 64 bytes into a page, where glibc's mmap put them.

nccl-tests' flags:
  -b, -e, -f, -n and -w mean what they mean there. -d, -o and -r take one value (there also
  'all'), and -c takes 0 or 1 (there, a number of checked calls). -F, -N, -S and -R are
  synk-bench's own: nccl-tests' -N is its run cycles, -S its timestamps, -R its buffer
  registration. There is no -g, -t, -a, -m or -z: one rank per process, a GPU each.

Baseline:
  mpi(us) is the raw MPI call with the same arguments on the same communicator
  (MPI_Allreduce, MPI_Bcast, MPI_Reduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Gather,
  MPI_Scatter, MPI_Alltoall), timed in the same rounds (see Timing for speedup). avg runs as MPI_SUM
  (MPI has no average). float16 and bfloat16 move as MPI_UINT16_T; MPI cannot reduce them, so
  their reductions show '-'.
  --baseline nccl (with --backend nccl): the column is nccl(us) instead, the raw NCCL call
  (ncclAllReduce, ncclBroadcast, ncclReduce, ncclAllGather, ncclReduceScatter; gather and
  scatter as ncclSend/ncclRecv in one group, as nccl-tests does) on the same device buffers,
  on an NCCL communicator of its own, followed by cudaStreamSynchronize; speedup is then
  nccl/synk, so 1.00 means synk adds nothing.

Probes (shm rows only):
  '# copy probe' (at the start, and after each table with a bound): each rank's share of
  memory bandwidth, every rank copying 64 MiB at once; each table's '# memory-bandwidth bound'
  line compares its largest shm row up to 64 MiB with the fastest probe so far (only a row at
  least the size of the last-level cache: smaller ones run in cache). One probe taken while
  the host runs slowly would make the bound too easy.
  '# handoff probe' (before and after each table, 2 or more ranks on the first node): rank 0
  rewrites 1 MiB that the next rank on its node read just before, then that rank reads
  it (medians of 7 tries). The rewrite is what a shm writer pays to take its slot's lines back
  from the reader: when it is 5-10x its usual time, lines cross between these cores slowly,
  the shm rows run on streaming stores (with SYNK_SHM_STREAM=auto), and an MPI baseline whose
  input does not change does not feel it (see -F). A probe whose reader sees wrong data
  counts in #wrong.

Check (-c 1):
  After timing, the inputs are filled with a small-integer pattern whose result is exact in
  every dtype, synk runs once, and every element of every rank's result is compared with its
  closed form; #wrong is the count over all ranks.

Memory:
  Before anything is allocated, each rank checks that its send and recv buffers (the largest
  table's; with -R 1 the largest send and recv of all the tables), times the ranks on its node,
  fit in the memory available there (MemAvailable, within the cgroup's limit): Linux would
  grant more, and the OOM killer end the job.

Exit status: 0 success; 1 some #wrong > 0, or a failure while running or while setting up a
backend; 2 bad command line, sizes whose buffers do not fit in a node's memory (see Memory), or
a backend that cannot run here (not built, no GPU, two ranks on one GPU) asked for by name
(reported on rank 0).)";

std::string join(std::initializer_list<const char*> names) {
  std::string out;
  for (const char* n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// The 0|1 options (-c, -F): their value as a bool, or a UsageError naming the flag.
bool zero_or_one(int value, const char* flag) {
  if (value != 0 && value != 1)
    throw UsageError(std::string(flag) + " " + std::to_string(value) + ": expected 0 or 1");
  return value == 1;
}

}  // namespace

std::size_t parse_size(const std::string& text, const char* what) {
  const auto bad = [&](const std::string& why) {
    return UsageError(std::string(what) + " '" + text + "' is not a valid size: " + why);
  };
  std::size_t i = 0;
  unsigned long long value = 0;
  constexpr unsigned long long kMax = std::numeric_limits<std::size_t>::max();
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const unsigned digit = static_cast<unsigned>(text[i] - '0');
    if (value > (kMax - digit) / 10) throw bad("too large");
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) throw bad("expected a whole number of bytes, optionally followed by K, M, G or T");
  unsigned shift = 0;
  if (i < text.size()) {
    switch (text[i]) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      case 'T':
      case 't':
        shift = 40;
        break;
      default:
        throw bad("unknown suffix (K, M, G and T are powers of 1024)");
    }
    ++i;
  }
  if (i != text.size()) throw bad("unexpected characters after the suffix");
  if (value > (kMax >> shift)) throw bad("too large");
  value <<= shift;
  if (value == 0) throw bad("must be at least 1 byte");
  return static_cast<std::size_t>(value);
}

bool wants_mpi_threads(int argc, char** argv) {
  bool multiple = false;  // the last one given counts, as for every option
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--mpi-threads=", 0) == 0) multiple = arg == "--mpi-threads=multiple";
    if (arg == "--mpi-threads" && i + 1 < argc) multiple = std::string(argv[++i]) == "multiple";
  }
  return multiple;
}

// What an argument CLI11 did not expect is: an option synk-bench lacks (nccl-tests' -g, -t, ...)
// is named as such; CLI11 listed the extras backwards ("1 -g").
std::string unknown_option_text(int argc, char** argv, const std::string& cli11_text) {
  std::istringstream words(cli11_text);
  const std::set<std::string> extras{std::istream_iterator<std::string>(words), {}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9')) continue;
    const std::string name = arg.substr(0, arg.find('='));
    if (extras.count(name) == 0 && extras.count(arg) == 0) continue;
    return "unknown option " + name +
           " (nccl-tests' -g, -t, -a, -m, -z and such have no counterpart: synk-bench runs one "
           "rank per process, a GPU each; see --help)";
  }
  return cli11_text;
}

namespace {

// What the command line gives as text or as an int, before it is checked into Options.
struct RawOptions {
  std::string min_text = "8", max_text = "64M", dtype_text = "float32", op_text = "sum";
  std::string backend_text = "mpi";
  long long factor = 2;
  int check = 1;
  int fresh = 0;
  int node_buffers = 0;
  int nonblocking = 0;
  int in_place = 0;
};

// -b, -e, -f, -n, -w, -S: the rows and how many calls each times.
void add_size_options(CLI::App& app, Options& o, RawOptions& raw) {
  app.add_option("-b,--minbytes", raw.min_text,
                 "Smallest size in bytes; K, M, G, T suffixes are powers of 1024")
      ->type_name("SIZE")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", raw.max_text, "Largest size in bytes (same suffixes)")
      ->type_name("SIZE")
      ->capture_default_str();
  app.add_option("-f,--stepfactor", raw.factor, "Multiply the size by this integer (>= 2) each row")
      ->type_name("FACTOR")
      ->capture_default_str();
  app.add_option("-n,--iters", o.iters,
                 "Timed calls per round per side (synk, MPI), 9 rounds per row; fewer for rows "
                 "that would take over ~2 s per side (see Timing)")
      ->type_name("ITERS")
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", o.warmup, "Untimed calls per side before each row")
      ->type_name("WARMUP")
      ->capture_default_str();
  app.add_option("-S,--settle_iters", o.settle,
                 "More untimed calls per side after the warmup, as many as fit in 0.25 s a side: "
                 "the shm backend measures its two ways of large calls (single copy or slots) in "
                 "calls 65-128 of each size and keeps the faster (0: none, so that the table "
                 "shows what that costs). With -w 0 the previous row's time sizes them, and the "
                 "first row gets none")
      ->type_name("SETTLE")
      ->capture_default_str();
}

// -d, -o, -r: what each call moves.
void add_type_options(CLI::App& app, Options& o, RawOptions& raw) {
  app.add_option("-d,--datatype", raw.dtype_text,
                 "Element type: " +
                     join({"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                           "uint64", "float16", "bfloat16", "float32", "float64"}) +
                     " (also char, short, int, half, fp16, bf16, float, fp32, double, fp64; "
                     "NCCL cannot reduce int16 and uint16)")
      ->type_name("DTYPE")
      ->capture_default_str();
  app.add_option("-o,--op", raw.op_text,
                 "Reduction for allreduce, reduce, reduce_scatter: sum, prod, min, max, avg "
                 "(also mean, average, product); avg needs a floating-point dtype")
      ->type_name("OP")
      ->capture_default_str();
  app.add_option("-r,--root", o.root, "Root rank of broadcast, reduce, gather, scatter")
      ->type_name("ROOT")
      ->capture_default_str();
}

// -c, -F, -P, -R, -N, -I: the buffers, and how the calls use them.
void add_buffer_options(CLI::App& app, Options& o, RawOptions& raw) {
  app.add_option("-c,--check", raw.check,
                 "1: after timing, check every element of synk's result (#wrong; exit 1 if "
                 "any is wrong); 0: skip, #wrong shows N/A")
      ->type_name("0|1")
      ->capture_default_str();
  app.add_option("-F,--fresh", raw.fresh,
                 "1: rewrite each rank's input before every timed call, outside the timing, as a "
                 "training step produces new gradients (see Timing); 0: the same input every call")
      ->type_name("0|1")
      ->capture_default_str();
  app.add_option("-P,--page-offset", o.page_offset,
                 "Place every send and recv buffer this many bytes past the start of a 4 KiB "
                 "page (0-4095, a multiple of 8); default: where aligned_alloc(64) puts it (for "
                 "large buffers with glibc, 64 bytes in). Copies between a buffer and synk's "
                 "shared memory run at different speeds at different offsets "
                 "(docs/shm-backend.md, Page offsets)")
      ->type_name("BYTES");
  app.add_option("-R,--node-buffers", raw.node_buffers,
                 "1: every send and recv buffer comes from synk's Communicator::alloc (a node "
                 "buffer, docs/library.md), which the shm backend's all_gather and large "
                 "all_reduce (and reduce on 3+ ranks) let the other ranks read in place; the MPI "
                 "column uses the same buffers. 0: ordinary memory")
      ->type_name("0|1")
      ->capture_default_str();
  app.add_option("-N,--nonblocking", raw.nonblocking,
                 "1: synk's side makes the non-blocking call (iall_reduce, ...) and waits for it "
                 "at once, so that the table shows what issuing costs beside -N 0's blocking "
                 "call; the MPI column stays MPI's blocking call")
      ->type_name("0|1")
      ->capture_default_str();
  app.add_option("-I,--in-place", raw.in_place,
                 "1: every call in place, as nccl-tests' in-place columns: synk's by NCCL's "
                 "conventions (send == recv; all_gather's and gather's send at its block of recv; "
                 "reduce_scatter's and scatter's recv at its block of send), the MPI column with "
                 "MPI_IN_PLACE (reduce_scatter's result in the first block); alltoall has no "
                 "in place. Without -F 1 each timed call reduces the previous call's result. 0: "
                 "separate buffers")
      ->type_name("0|1")
      ->capture_default_str();
}

// --mpi-threads, --backend, --baseline, --json: what runs, beside what, and where rows go.
void add_run_options(CLI::App& app, Options& o, RawOptions& raw) {
  app.add_option("--mpi-threads", o.mpi_threads,
                 "The thread level MPI starts with, for both sides: single (MPI_Init, a plain MPI "
                 "program's) or multiple (MPI_THREAD_MULTIPLE, what synk asks for when it starts "
                 "MPI itself: -N 1 calls of the mpi backend then run on synk's progress thread; "
                 "Open MPI's small messages cost about 0.1 us more)")
      ->type_name("single|multiple")
      ->capture_default_str();
  app.add_option("--backend", raw.backend_text,
                 "synk backend: mpi, shm, hier, nccl, or all (every backend that can run here, "
                 "one row each; the others get a '# backend ...: not available' note). hier "
                 "needs ranks on several nodes (-H, or SYNK_SIMULATE_NODES). nccl's calls "
                 "take device buffers on the communicator's GPU, filled and checked through "
                 "host copies outside the timing; its MPI column is the MPI call on host "
                 "buffers")
      ->type_name("BACKEND")
      ->capture_default_str();
  app.add_option("--baseline", o.baseline,
                 "What the baseline column times: mpi (the raw MPI call on host buffers), or "
                 "nccl (the raw NCCL call on the same device buffers; --backend nccl only)")
      ->type_name("mpi|nccl")
      ->capture_default_str();
  app.add_option("--json", o.json_file,
                 "Rank 0 also writes the rows to FILE as a JSON list of objects (coll, bytes, "
                 "count, dtype, op, root, backend, time_us, algbw, busbw, wrong, mpi_time_us "
                 "(nccl_time_us with --baseline nccl), speedup; null where the table shows '-', "
                 "N/A or no root; and how it was made: ranks, in_place, nonblocking, fresh, "
                 "node_buffers)")
      ->type_name("FILE");
}

// The collectives, the sizes and the calls per row.
void check_rows(Options& o, const RawOptions& raw) {
  if (o.coll_name == "all") {
    o.colls = {Coll::allreduce, Coll::broadcast, Coll::reduce, Coll::allgather,
               Coll::reduce_scatter};
  } else if (auto c = parse_coll(o.coll_name)) {
    o.colls = {*c};
  } else {
    throw UsageError("unknown collective '" + o.coll_name +
                     "' (expected allreduce, broadcast, reduce, allgather, reduce_scatter, "
                     "gather, scatter, alltoall or all; underscores are ignored)");
  }
  o.min_bytes = parse_size(raw.min_text, "-b");
  o.max_bytes = parse_size(raw.max_text, "-e");
  if (o.min_bytes > o.max_bytes) {
    throw UsageError("-b " + raw.min_text + " is larger than -e " + raw.max_text);
  }
  if (raw.factor < 2) {
    throw UsageError("-f " + std::to_string(raw.factor) + ": FACTOR must be at least 2");
  }
  o.factor = static_cast<std::size_t>(raw.factor);
  if (o.iters < 1) throw UsageError("-n " + std::to_string(o.iters) + ": ITERS must be at least 1");
  if (o.warmup < 0) throw UsageError("-w " + std::to_string(o.warmup) + ": WARMUP must be >= 0");
  if (o.settle < 0) throw UsageError("-S " + std::to_string(o.settle) + ": SETTLE must be >= 0");
}

void check_types(Options& o, const RawOptions& raw) {
  if (auto t = parse_data_type(raw.dtype_text)) {
    o.dtype = *t;
  } else {
    throw UsageError("unknown datatype '" + raw.dtype_text +
                     "' (expected int8, uint8, int16, uint16, int32, uint32, "
                     "int64, uint64, float16, bfloat16, float32 or float64)");
  }
  if (auto op = parse_reduce_op(raw.op_text)) {
    o.op = *op;
  } else {
    throw UsageError("unknown op '" + raw.op_text + "' (expected sum, prod, min, max or avg)");
  }
  if (o.op == ReduceOp::avg && !is_floating(o.dtype)) {
    throw UsageError(std::string("op avg needs a floating-point datatype, not ") +
                     to_string(o.dtype));
  }
  if (o.root < 0) throw UsageError("-r " + std::to_string(o.root) + ": ROOT must be >= 0");
}

void check_flags(Options& o, const RawOptions& raw, const CLI::App& app) {
  o.check = zero_or_one(raw.check, "-c");
  o.fresh = zero_or_one(raw.fresh, "-F");
  o.node_buffers = zero_or_one(raw.node_buffers, "-R");
  o.nonblocking = zero_or_one(raw.nonblocking, "-N");
  o.in_place = zero_or_one(raw.in_place, "-I");
  if (o.in_place && std::find(o.colls.begin(), o.colls.end(), Coll::alltoall) != o.colls.end()) {
    throw UsageError("-I 1: alltoall has no in place in synk (its send and recv must not "
                     "overlap)");
  }
  if (o.mpi_threads != "single" && o.mpi_threads != "multiple") {
    throw UsageError("--mpi-threads " + o.mpi_threads + ": expected single or multiple");
  }
  const bool bad_offset = o.page_offset < 0 || o.page_offset > 4095 || o.page_offset % 8 != 0;
  if (app.count("-P") > 0 && bad_offset) {  // -1 is the default's mark, not a value
    throw UsageError("-P " + std::to_string(o.page_offset) +
                     ": BYTES must be a multiple of 8 from 0 to 4095");
  }
}

void check_backends(Options& o, const RawOptions& raw) {
  if (raw.backend_text == "all") {
    o.backends = {"mpi", "shm", "hier", "nccl"};
    o.backend_all = true;
  } else if (raw.backend_text == "mpi" || raw.backend_text == "shm" ||
             raw.backend_text == "hier" || raw.backend_text == "nccl") {
    o.backends = {raw.backend_text};
  } else {
    throw UsageError("unknown backend '" + raw.backend_text +
                     "' (expected mpi, shm, hier, nccl or all)");
  }
  if (o.baseline != "mpi" && o.baseline != "nccl") {
    throw UsageError("unknown baseline '" + o.baseline + "' (expected mpi or nccl)");
  }
  if (o.baseline == "nccl" && raw.backend_text != "nccl") {
    throw UsageError("--baseline nccl times raw NCCL beside synk's nccl rows: it needs "
                     "--backend nccl, not '" + raw.backend_text + "'");
  }
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  RawOptions raw;
  CLI::App app(
      "synk-bench: nccl-tests style benchmark of synk's collectives, with the raw MPI call "
      "timed beside each row.",
      "synk-bench");
  // As in nccl-tests, a repeated option takes its last value.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("COLL", o.coll_name,
                 "Collective: allreduce, broadcast, reduce, allgather, reduce_scatter, gather, "
                 "scatter, alltoall, or all (= allreduce, broadcast, reduce, allgather, "
                 "reduce_scatter); underscores are ignored (all_reduce, all_gather, all_to_all)")
      ->required();
  add_size_options(app, o, raw);
  add_type_options(app, o, raw);
  add_buffer_options(app, o, raw);
  add_run_options(app, o, raw);
  app.footer(kFooter);
  app.set_version_flag("--version", "synk-bench (synk " SYNK_VERSION_STRING ")",
                       "print the version and exit");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    o.help = true;
    o.help_text = app.help();
    return o;
  } catch (const CLI::CallForVersion& e) {
    o.help = true;  // printed, exit 0
    o.help_text = std::string(e.what()) + "\n";
    return o;
  } catch (const CLI::ExtrasError& e) {
    throw UsageError(unknown_option_text(argc, argv, e.what()));
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }

  check_rows(o, raw);
  check_types(o, raw);
  check_flags(o, raw, app);
  check_backends(o, raw);
  return o;
}

void check_against_ranks(const Options& o, int nranks) {
  // A root matters only to the collectives that have one (nccl-tests ignores it elsewhere).
  const bool rooted = std::any_of(o.colls.begin(), o.colls.end(), has_root);
  if (rooted && o.root >= nranks) {
    throw UsageError("-r " + std::to_string(o.root) + ": ROOT is out of range for " +
                     std::to_string(nranks) + " ranks (valid: 0.." + std::to_string(nranks - 1) +
                     ")");
  }
}

std::vector<std::size_t> size_steps(const Options& o) {
  std::vector<std::size_t> out;
  for (std::size_t b = o.min_bytes; b <= o.max_bytes; b *= o.factor) {
    out.push_back(b);
    if (b > o.max_bytes / o.factor) break;  // the next step would pass max (or overflow)
  }
  return out;
}

}  // namespace synk::bench
