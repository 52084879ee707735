// synk::Communicator: bootstrap, then validate-once-and-dispatch for every collective.
#include "synk/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

#include "core/backend.h"
#include "core/call_check.h"
#include "core/call_queue.h"
#include "core/env.h"
#include "core/finalize_hooks.h"
#include "core/logging.h"
#include "core/memory_kind.h"
#include "core/mpi_check.h"
#include "core/mpi_runtime.h"
#include "core/mpi_watchdog.h"
#include "core/settings_agreement.h"
#include "core/spread.h"
#include "core/timeline.h"
#include "core/validation.h"

namespace synk {

namespace detail {

struct CommState;

namespace {

// The communicators alive, whose queued non-blocking calls MPI_Finalize finishes first (they
// run on synk's threads; past MPI_Finalize their MPI calls crashed the process). One being
// finished is not destroyed (by another thread) until it is done.
std::mutex live_mu;
std::condition_variable live_cv;
std::vector<CommState*> live_states;
const CommState* finishing = nullptr;
pid_t states_owner = 0;  // the process of live_states (a forked child has copies, not calls)

void forget(CommState* st) {
  std::unique_lock lk(live_mu);
  live_cv.wait(lk, [st] { return finishing != st; });
  std::erase(live_states, st);
}

}  // namespace

struct CommState {
  CommContext ctx;
  // The communicators the calls run on (the backend's, SYNK_CHECK_CALLS's comparison): where
  // MPI allows threads, duplicates of ctx's, since the calls may run on the progress thread
  // while the caller makes synk's other MPI calls (alloc, split, Data) on ctx's; else ctx's.
  CommContext call_ctx;
  bool owns_call_ctx = false;
  std::unique_ptr<Backend> backend;
  std::string backend_name;
  std::string requested;  // what the user asked for ("auto", ...): a split chooses again
  // "auto" in a build with NCCL: calls on device memory go to `device`, a communicator on the
  // nccl backend over the same ranks, made at the first such call (route() in this file).
  bool routes_by_memory = false;
  std::unique_ptr<CommState> device;
  // SYNK_TIMELINE's rows of this communicator's calls: the collective's name, and " (comm N)"
  // after it for the process's Nth communicator from the second on, so that calls of two
  // communicators running at once (a KeyValue engine's and the program's) never share a row.
  std::string timeline_suffix;
  ::CUstream_st* stream = nullptr;  // set_stream: the caller's cudaStream_t for device backends
  bool check_calls = settings().check_calls;  // SYNK_CHECK_CALLS, read once
  bool buffer_rules = false;                  // backend->has_buffer_rules(), asked once
  bool waits_in_mpi = false;                  // backend->waits_in_mpi(), asked once
  // backend_name as backend->name()'s static text, for the watchdog
  const char* backend_cname = "";
  double timeout_s = settings().timeout_s;    // SYNK_TIMEOUT, read once
  bool on_device = false;                     // backend->device() >= 0: calls go on a stream
  // Whether non-blocking calls run on a progress thread: where they make no MPI call (shm
  // without SYNK_CHECK_CALLS), or MPI allows two threads in it at once. Elsewhere they run
  // before they return, on the caller's thread.
  bool background = false;
  std::atomic<const char*> master_alone{nullptr};  // see detail::set_master_alone
  std::atomic<int> blocking_calls{0};  // threads in a blocking call on it (OneBlockingCall)
  // The non-blocking calls, from the first one on; read without the mutex by blocking calls.
  std::atomic<CallQueue*> queue{nullptr};
  std::unique_ptr<CallQueue> queue_owner;
  std::mutex queue_mutex;

  CallQueue& calls() {
    if (CallQueue* q = queue.load(std::memory_order_acquire)) return *q;
    std::lock_guard lk(queue_mutex);
    if (!queue_owner) {
      queue_owner = std::make_unique<CallQueue>();
      queue.store(queue_owner.get(), std::memory_order_release);
    }
    return *queue_owner;
  }

  CommState();
  ~CommState() {
    forget(this);
    queue_owner.reset();  // waits for the calls issued, while the backend is still there
    device.reset();
    backend.reset();  // before the communicators it uses
    if (owns_call_ctx) free_context(call_ctx);
    free_context(ctx);
  }
};

namespace {

// At MPI_Finalize: every rank finishes its queued calls, which the others' calls meet, and
// then leaves its communicators (Backend::leave). (Outside the lock: a call may make a
// communicator of its own.)
void finish_queued_calls() {
  if (getpid() != states_owner) return;  // a forked child's MPI_Finalize (mpi4py's at exit)
  const CommState* done = nullptr;  // the last one finished, kept alive by `finishing`
  for (;;) {
    CallQueue* q = nullptr;
    {
      std::lock_guard lk(live_mu);
      // After the last one finished, found again: another thread may have destroyed one before
      // it meanwhile, which moved it down the list.
      const auto next = done == nullptr
                            ? live_states.begin()
                            : std::find(live_states.begin(), live_states.end(), done) + 1;
      finishing = nullptr;
      live_cv.notify_all();
      if (next >= live_states.end()) {
        for (CommState* st : live_states) {
          if (st->backend) st->backend->leave();
        }
        return;
      }
      finishing = done = *next;
      q = (*next)->queue.load(std::memory_order_acquire);
    }
    if (q != nullptr) q->run_in_order([] {});
  }
}

}  // namespace

CommState::CommState() {
  static std::once_flag once;
  std::call_once(once, [] {
    states_owner = getpid();
    at_mpi_finalize(finish_queued_calls);
  });
  std::lock_guard lk(live_mu);
  live_states.push_back(this);
}

const CommContext& context_of(const Communicator& comm) { return comm.st().ctx; }

bool runs_in_background(const Communicator& comm) { return comm.st().background; }

bool routes_by_memory(const Communicator& comm) { return comm.st().routes_by_memory; }

void set_master_alone(Communicator& comm, const char* since) {
  // One rank has no workers: nothing would wait, so nothing is refused.
  comm.st().master_alone.store(comm.size() > 1 ? since : nullptr, std::memory_order_relaxed);
}

// See set_master_alone: `what` would wait for the workers until SYNK_TIMEOUT.
void refuse_if_master_alone(const CommState& st, const char* what) {
  const char* since = st.master_alone.load(std::memory_order_relaxed);
  if (since == nullptr) return;
  throw Error(ErrorCode::InvalidUsage,
              std::string(what) + " on the master between " + since + " and close(), outside "
              "a request: the workers serve the master's requests and never join this call, so it "
              "would wait for them until SYNK_TIMEOUT; make it in a Function's body, or before " +
              since + " or after close()");
}

Communicator duplicate_for_engine(const Communicator& comm) {
  refuse_if_master_alone(comm.st(), "a KeyValue");
  CommOptions options;
  // hier is what auto makes across nodes; the engine's calls are on host memory.
  const detail::BackendKind k = comm.st().backend->kind();
  options.backend = k == detail::BackendKind::hier || k == detail::BackendKind::nccl
                        ? "auto"
                        : comm.backend();
  options.yield_when_waiting = true;
  return Communicator(comm.mpi_comm(), options);
}

}  // namespace detail

namespace {

using detail::CollArgs;
using detail::Collective;

#if SYNK_HAVE_NCCL
constexpr bool kBuiltWithNccl = true;
#else
constexpr bool kBuiltWithNccl = false;
#endif

std::unique_ptr<detail::CommState> bootstrap(MPI_Comm comm, const CommOptions& options) {
  const detail::MpiWatch watch = detail::watch_step("making a communicator", comm);
  detail::agree_on_settings(comm, options.backend, options.yield_when_waiting);
  const detail::Settings& s = detail::settings();
  auto state = std::make_unique<detail::CommState>();
  state->ctx = detail::make_context(comm, s.simulate_nodes);
  state->ctx.yields_core = options.yield_when_waiting;
  int world_rank = 0;  // the log lines show the job's rank, whatever communicator was adopted
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  detail::set_log_rank(world_rank);
  if (state->ctx.rank != world_rank) {
    SYNK_LOG_AT(info, "this process is rank " << state->ctx.rank << " of this communicator: its "
                          "errors name the communicator's ranks, the log lines' rN the job's");
  }
  detail::timeline::start(state->ctx);  // SYNK_TIMELINE: once per process
  static std::atomic<int> communicators{0};
  if (const int n = ++communicators; n > 1) {
    state->timeline_suffix = " (comm " + std::to_string(n) + ")";
  }
  const bool threads = detail::mpi_allows_threads();
  state->call_ctx = threads ? detail::duplicate_context(state->ctx) : state->ctx;
  state->owns_call_ctx = threads;
  const std::string requested = options.backend.empty() ? s.backend : options.backend;
  state->backend = detail::make_backend(requested, state->call_ctx);
  state->backend_name = state->backend->name();
  state->buffer_rules = state->backend->has_buffer_rules();
  state->waits_in_mpi = state->backend->waits_in_mpi();
  state->backend_cname = state->backend->name();
  state->requested = requested;
  // Across nodes the calls are always compared first. Without it, a rank whose arguments were
  // rejected left the call alone, and its next call was paired with the others' current one
  // on the other node (an all_reduce of 4 floats of 1 gave 9 instead of 4, silently); the
  // shm backend tells its node inside the call (reject), but MPI between the nodes cannot.
  // One small all-gather per call, which is little next to crossing the network.
  if (state->backend->checks_every_call()) state->check_calls = true;
  state->on_device = state->backend->device() >= 0;
  state->background = threads || !(state->waits_in_mpi || state->check_calls);
  if (!state->background && state->ctx.rank == 0) {
    SYNK_LOG_AT(info, "non-blocking calls on the " << state->backend_name
                          << " backend run at issue: MPI was initialized below "
                             "MPI_THREAD_MULTIPLE, so no other thread may call it");
  }
  state->routes_by_memory = requested == "auto" && kBuiltWithNccl;
  return state;
}

// Where `a` runs on a communicator that routes by memory: device (or managed) memory to its
// nccl part, started at the first such call (which every rank makes: it is a collective), host
// memory to shm or hier. Every call but gatherv and scatterv moves the same count on every rank,
// so each rank's own buffers decide, and a call that moves nothing stays on the host; the ranks
// of a gatherv or scatterv that move nothing learn the route from the others, in one small MPI
// all-reduce per call.
detail::CommState& route(detail::CommState& st, const CollArgs& a) {
  if (!st.routes_by_memory) return st;
  bool device = false;
  if (detail::counts_differ(a.coll)) {
    int kind = 0;  // 0 host or nothing, 1 device, 2 buffers of both kinds
    try {
      kind = detail::call_memory(a, st.ctx.rank) == detail::MemoryKind::device ? 1 : 0;
    } catch (const Error&) {
      kind = 2;
    }
    {
      // A wait inside MPI before the backend's own deadlines: a rank that never joins (late,
      // or in another call) ended nothing and left the others here for ever. The watchdog ends
      // the job at SYNK_TIMEOUT, as it does for the mpi backend's calls.
      detail::MpiWatch watch(a, st.ctx.rank, "auto (routing by memory)", false, st.timeout_s);
      SYNK_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &kind, 1, MPI_INT, MPI_MAX, st.ctx.comm));
    }
    if (kind == 2) {
      throw Error(ErrorCode::InvalidArgument,
                  std::string(detail::to_string(a.coll)) +
                      ": a rank's buffers are of both kinds, device and host memory");
    }
    device = kind == 1;
  } else if (a.count > 0 || a.typed_error != nullptr) {
    // (A typed helper's refusal goes where its buffers would, even when it moves nothing: an
    // empty span beside the others' device calls.)
    device = detail::call_memory(a, st.ctx.rank) == detail::MemoryKind::device;
  }
  if (!device) return st;
  if (!st.device) {
    SYNK_LOG_AT(info, "auto: the first call on device memory (" << detail::to_string(a.coll)
                                                                << "): starting NCCL");
    st.device = bootstrap(st.ctx.comm, CommOptions{"nccl"});
  }
  st.device->stream = st.stream;
  return *st.device;
}

}  // namespace

Communicator::Communicator() : Communicator(CommOptions{}) {}

Communicator::Communicator(const CommOptions& options) {
  detail::ensure_mpi_initialized();
  state_ = bootstrap(MPI_COMM_WORLD, options);
}

Communicator::Communicator(MPI_Comm comm, const CommOptions& options) {
  detail::ensure_mpi_initialized();
  if (comm == MPI_COMM_NULL) {
    throw Error(ErrorCode::InvalidArgument, "Communicator: comm is MPI_COMM_NULL");
  }
  int inter = 0;
  SYNK_CHECK_MPI(MPI_Comm_test_inter(comm, &inter));
  if (inter) {  // it failed later, in MPI_Comm_split_type, as a Backend error
    throw Error(ErrorCode::InvalidArgument,
                "Communicator: comm is an intercommunicator; synk's collectives run on an "
                "intracommunicator (MPI_Intercomm_merge makes one of it)");
  }
  state_ = bootstrap(comm, options);
}

// A moved-from Communicator has no state: say so instead of dereferencing null.
detail::CommState& Communicator::st() const {
  if (!state_) {
    throw Error(ErrorCode::InvalidUsage,
                "Communicator: used after it was moved from (use the one it was moved to)");
  }
  return *state_;
}

Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;

int Communicator::rank() const { return st().ctx.rank; }
int Communicator::size() const { return st().ctx.size; }
int Communicator::local_rank() const { return st().ctx.local_rank; }
int Communicator::local_size() const { return st().ctx.local_size; }
int Communicator::node() const { return st().ctx.node; }
int Communicator::num_nodes() const { return st().ctx.num_nodes; }
const std::string& Communicator::backend() const { return st().backend_name; }
MPI_Comm Communicator::mpi_comm() const { return st().ctx.comm; }
int Communicator::device() const {
  const detail::CommState& s = st();
  return s.device ? s.device->backend->device() : s.backend->device();
}

Communicator Communicator::split(int color, int key) const {
  // A negative color (but MPI_UNDEFINED) fails MPI_Comm_split on that rank alone, and the others
  // waited in theirs forever: agree first, and fail on every rank.
  detail::refuse_after_finalize("split");
  detail::refuse_if_master_alone(st(), "split");
  const detail::MpiWatch watch = detail::watch_step("split", st().ctx.comm);
  const int size = st().ctx.size;
  int first_bad = color >= 0 || color == MPI_UNDEFINED ? size : st().ctx.rank;
  SYNK_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, st().ctx.comm));
  if (first_bad < size) {
    throw Error(ErrorCode::InvalidArgument,
                "split: rank " + std::to_string(first_bad) +
                    " passed a negative color (a color is >= 0 or MPI_UNDEFINED)" +
                    (first_bad == st().ctx.rank ? ": " + std::to_string(color) : ""));
  }
  MPI_Comm part = MPI_COMM_NULL;
  const int rc = MPI_Comm_split(st().ctx.comm, color, key, &part);
  if (rc != MPI_SUCCESS) {
    throw Error(ErrorCode::Backend, "split: MPI_Comm_split(color " + std::to_string(color) +
                                        ", key " + std::to_string(key) + ") failed");
  }
  if (part == MPI_COMM_NULL) {
    throw Error(ErrorCode::InvalidUsage,
                "split: this rank's color is MPI_UNDEFINED, so it is in no part and gets no "
                "Communicator (the others' split went on without it)");
  }
  CommOptions options;
  // The request, not the result: "hier" is no name make_backend takes, and a part that lies
  // on one node is better served by shm.
  options.backend = st().requested;
  try {
    Communicator out(part, options);  // duplicates part
    MPI_Comm_free(&part);
    return out;
  } catch (...) {
    MPI_Comm_free(&part);  // it leaked when the part's backend could not be made
    throw;
  }
}

void Communicator::check_same_size(const char* op, std::size_t send, std::size_t recv,
                                   DataType dtype, const void* send_data, void* recv_data) {
  if (send != recv) {
    reject_typed(op, std::min(send, recv), dtype,
                 "send has " + std::to_string(send) + " elements but recv has " +
                     std::to_string(recv),
                 0, send_data, recv_data);
  }
}

namespace {

// Validate once (locally, or against every rank under SYNK_CHECK_CALLS), then dispatch; the
// backend's Request (complete, except on a device backend) is waited for by the caller.
Request dispatch(detail::CommState& st, CollArgs&& a) {
  a.stream = st.stream;
  std::optional<std::string> buffers;  // made only for a backend with buffer rules
  if (st.buffer_rules) {
    buffers = st.backend->buffer_error(a);
    if (!buffers->empty() && a.typed_error == nullptr) a.typed_error = &*buffers;
  }
  if (st.check_calls) {
    detail::validate_across_ranks(a, st.call_ctx);
  } else {
    try {
      detail::validate(a, st.ctx);
    } catch (const Error& e) {
      st.backend->reject(a, e);  // the shm backend fails the call on every rank
      throw;
    }
  }
  detail::Backend& b = *st.backend;
  std::optional<detail::MpiWatch> watch;
  if (st.waits_in_mpi) {
    watch.emplace(a, st.ctx.rank, st.backend_cname, st.check_calls, st.timeout_s);
  }
  Request req;
  switch (a.coll) {
    case Collective::all_reduce: req = b.all_reduce(a); break;
    case Collective::reduce: req = b.reduce(a); break;
    case Collective::broadcast: req = b.broadcast(a); break;
    case Collective::all_gather: req = b.all_gather(a); break;
    case Collective::gather: req = b.gather(a); break;
    case Collective::gatherv: req = b.gatherv(a); break;
    case Collective::scatter: req = b.scatter(a); break;
    case Collective::scatterv: req = b.scatterv(a); break;
    case Collective::reduce_scatter: req = b.reduce_scatter(a); break;
    case Collective::all_to_all: req = b.all_to_all(a); break;
    case Collective::all_to_allv: req = b.all_to_allv(a); break;
    case Collective::barrier: req = b.barrier(); break;
  }
  if (watch) req.wait();  // inside the watch: MPI's waits are what it watches
  return req;
}

// The bytes a timeline event shows: unchecked, since it may come before validation.
std::uint64_t timeline_bytes(const CollArgs& a) { return a.count * size_of(a.dtype); }
std::string track_of(const detail::CommState& st, Collective c) {
  return detail::to_string(c) + st.timeline_suffix;
}

// Runs a call to its end on this thread; on the timeline, its "running" span.
void execute(detail::CommState& st, CollArgs&& a) {
  if (!detail::timeline::on()) {
    dispatch(st, std::move(a)).wait();
    return;
  }
  const std::string track = track_of(st, a.coll);
  detail::timeline::begin(track, "running", timeline_bytes(a));
  try {
    dispatch(st, std::move(a)).wait();
  } catch (...) {
    detail::timeline::end(track);
    throw;
  }
  detail::timeline::end(track);
}

// A blocking call, while no other thread is in one on the same communicator: two threads' calls
// are taken in any order on each rank, so the ranks mixed them silently (wrong sums, as in MPI,
// where it is erroneous). Refused on the rank that sees two at once (calls that do not overlap
// in time are the program's to order).
class OneBlockingCall {
 public:
  OneBlockingCall(std::atomic<int>& calls, Collective c) : calls_(calls) {
    if (calls_.fetch_add(1, std::memory_order_acquire) == 0) return;
    calls_.fetch_sub(1, std::memory_order_release);
    throw Error(ErrorCode::InvalidUsage,
                std::string(detail::to_string(c)) +
                    ": another thread is in a blocking call on this communicator; the ranks may "
                    "take two threads' calls in different orders, and mix them. Give each "
                    "thread a communicator of its own (split, or another Communicator over the "
                    "same MPI communicator)");
  }
  ~OneBlockingCall() { calls_.fetch_sub(1, std::memory_order_release); }
  OneBlockingCall(const OneBlockingCall&) = delete;
  OneBlockingCall& operator=(const OneBlockingCall&) = delete;

 private:
  std::atomic<int>& calls_;
};

// A blocking call: after the non-blocking calls issued before it. `routed`: the state route()
// chose for it already (a gatherv's route is an MPI all-reduce of its own), or null.
void run(detail::CommState& st, CollArgs&& a, detail::CommState* routed = nullptr) {
  detail::refuse_after_finalize(detail::to_string(a.coll));
  const OneBlockingCall only(st.blocking_calls, a.coll);
  a.label = detail::current_call_label();
  detail::refuse_if_master_alone(st, detail::to_string(a.coll));
  detail::CommState& to = routed != nullptr ? *routed : route(st, a);
  detail::CallQueue* q = st.queue.load(std::memory_order_acquire);
  if (q == nullptr) {
    execute(to, std::move(a));
    return;
  }
  q->run_in_order([&to, &a] { execute(to, CollArgs(a)); });
}

// A non-blocking call on the progress thread's queue; `counts` owns gatherv's recv_counts
// (scatterv's send_counts).
class QueuedCollective final : public detail::QueuedCall {
 public:
  QueuedCollective(detail::CommState& st, CollArgs&& a, std::vector<std::size_t> counts,
                   std::vector<std::size_t> recv_counts)
      : QueuedCall(detail::to_string(a.coll)),
        st_(st),
        a_(std::move(a)),
        counts_(std::move(counts)),
        recv_counts_(std::move(recv_counts)),
        issued_ns_(detail::timeline::on() ? detail::timeline::clock_ns() : 0) {
    if (!counts_.empty()) a_.counts = counts_;
    if (!recv_counts_.empty()) a_.recv_counts = recv_counts_;
  }
  void run() override {
    if (issued_ns_ != 0 && detail::timeline::on()) {  // its wait in the queue, then it runs
      const std::string track = track_of(st_, a_.coll);
      detail::timeline::async_span(track, track + " queued", issued_ns_, timeline_bytes(a_));
    }
    execute(st_, CollArgs(a_));
  }

 private:
  detail::CommState& st_;
  CollArgs a_;
  std::vector<std::size_t> counts_, recv_counts_;
  std::uint64_t issued_ns_;  // timeline::clock_ns() at issue, when the timeline is on
};

// A non-blocking call; its errors reach the program through the Request, wherever it ran.
Request issue(detail::CommState& st, CollArgs&& a, std::vector<std::size_t> counts = {},
              std::vector<std::size_t> recv_counts = {}) {
  try {
    detail::refuse_after_finalize(detail::to_string(a.coll));
    detail::refuse_if_master_alone(st, detail::to_string(a.coll));
  } catch (...) {
    return detail::failed_request(std::current_exception());
  }
  a.label = detail::current_call_label();
  detail::CommState* routed = nullptr;
  if (st.routes_by_memory) {
    detail::CommState* to = &st;
    try {
      to = &route(st, a);
    } catch (...) {
      return detail::failed_request(std::current_exception());
    }
    routed = to;
    if (to != &st) {  // on the device: after the host calls issued before it, then on its stream
      if (detail::CallQueue* q = st.queue.load(std::memory_order_acquire)) {
        q->run_in_order([] {});
      }
      return issue(*to, std::move(a), std::move(counts), std::move(recv_counts));
    }
  }
  if (st.on_device || !st.background) {
    try {
      if (st.on_device) {  // queued on the stream
        if (detail::timeline::on()) {
          detail::timeline::instant(track_of(st, a.coll), "enqueued", timeline_bytes(a));
        }
        return dispatch(st, std::move(a));
      }
      a.at_issue = true;
      run(st, std::move(a), routed);  // the call needs MPI on this thread: it runs now
      return detail::completed_request();
    } catch (...) {
      return detail::failed_request(std::current_exception());
    }
  }
  return st.calls().submit<QueuedCollective>(st, std::move(a), std::move(counts),
                                             std::move(recv_counts));
}

CollArgs args(Collective c, const void* send, void* recv, std::size_t count, DataType dtype,
              ReduceOp op = ReduceOp::sum, int root = 0) {
  CollArgs a;
  a.coll = c;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  a.root = root;
  return a;
}

// The collective a typed helper named `op` makes, so that its rejection pairs with the others'
// call of it.
Collective collective_named(const std::string& op) {
  for (Collective c : {Collective::reduce_scatter, Collective::all_gather, Collective::gather,
                       Collective::scatter, Collective::all_to_all}) {
    if (op == detail::to_string(c)) return c;
  }
  return Collective::all_reduce;
}

}  // namespace

void Communicator::reject_typed(const char* op, std::size_t count, DataType dtype,
                                const std::string& why, int root, const void* send, void* recv) {
  const std::string name = op;
  CollArgs a = args(collective_named(name), send, recv, count, dtype, ReduceOp::sum, root);
  a.typed_error = &why;
  run(st(), std::move(a));  // validate() throws why, after telling the other ranks
  throw Error(ErrorCode::InvalidArgument, name + ": " + why);  // not reached
}

void Communicator::set_stream(::CUstream_st* stream) { st().stream = stream; }

::CUstream_st* Communicator::stream() const { return st().stream; }

NodeBuffer Communicator::alloc(std::size_t bytes) {
  detail::refuse_if_master_alone(st(), "alloc");
  // After the calls issued before it: the shm backend adds the buffer to the tables that a
  // call running on the progress thread reads.
  if (detail::CallQueue* q = st().queue.load(std::memory_order_acquire)) {
    NodeBuffer out;
    q->run_in_order([&] { out = alloc_now(bytes); });
    return out;
  }
  return alloc_now(bytes);
}

NodeBuffer Communicator::alloc_now(std::size_t bytes) {
  detail::refuse_after_finalize("alloc");
  const detail::MpiWatch watch = detail::watch_step("alloc", st().ctx.comm);
  // Every rank must ask for as much (each maps the others' parts), and have room for it: both
  // checked on every rank, so that either is an error everywhere (KeyValue allocates in the
  // middle of a cycle, where a rank that went on would wait for the one that threw).
  const std::string no_room = detail::node_buffer_room_error(bytes);
  const auto rank = static_cast<std::uint64_t>(st().ctx.rank);
  detail::Spread asked({bytes, no_room.empty() ? 0 : rank + 1});
  SYNK_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, asked.data(), asked.size(), MPI_UINT64_T, MPI_MAX,
                               st().ctx.comm));
  if (!asked.same(0)) {
    throw Error(ErrorCode::InvalidUsage,
                "alloc: the ranks asked for different sizes (this rank, " +
                    std::to_string(st().ctx.rank) + ", " + std::to_string(bytes) +
                    " bytes; the largest " + std::to_string(asked.largest(0)) +
                    ", the smallest " + std::to_string(asked.smallest(0)) + ")");
  }
  if (!no_room.empty()) throw Error(ErrorCode::System, "alloc: " + no_room);
  if (const std::uint64_t short_of_room = asked.largest(1); short_of_room != 0) {
    throw Error(ErrorCode::Remote, "alloc: rank " + std::to_string(short_of_room - 1) +
                                       " cannot reserve " + std::to_string(bytes) +
                                       " bytes of memory for a node buffer");
  }
  return st().backend->alloc(bytes);
}

void Communicator::all_reduce(const void* send, void* recv, std::size_t count, DataType dtype,
                              ReduceOp op) {
  run(st(), args(Collective::all_reduce, send, recv, count, dtype, op));
}

void Communicator::reduce(const void* send, void* recv, std::size_t count, DataType dtype,
                          ReduceOp op, int root) {
  run(st(), args(Collective::reduce, send, recv, count, dtype, op, root));
}

void Communicator::broadcast(void* buf, std::size_t count, DataType dtype, int root) {
  run(st(), args(Collective::broadcast, buf, buf, count, dtype, ReduceOp::sum, root));
}

void Communicator::all_gather(const void* send, void* recv, std::size_t count, DataType dtype) {
  run(st(), args(Collective::all_gather, send, recv, count, dtype));
}

void Communicator::gather(const void* send, void* recv, std::size_t count, DataType dtype,
                          int root) {
  run(st(), args(Collective::gather, send, recv, count, dtype, ReduceOp::sum, root));
}

void Communicator::gatherv(const void* send, std::size_t send_count, void* recv,
                           std::span<const std::size_t> recv_counts, DataType dtype, int root) {
  CollArgs a = args(Collective::gatherv, send, recv, send_count, dtype, ReduceOp::sum, root);
  a.counts = recv_counts;
  run(st(), std::move(a));
}

void Communicator::scatter(const void* send, void* recv, std::size_t count, DataType dtype,
                           int root) {
  run(st(), args(Collective::scatter, send, recv, count, dtype, ReduceOp::sum, root));
}

void Communicator::scatterv(const void* send, std::span<const std::size_t> send_counts, void* recv,
                            std::size_t recv_count, DataType dtype, int root) {
  CollArgs a = args(Collective::scatterv, send, recv, recv_count, dtype, ReduceOp::sum, root);
  a.counts = send_counts;
  run(st(), std::move(a));
}

void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                  DataType dtype, ReduceOp op) {
  run(st(), args(Collective::reduce_scatter, send, recv, recv_count, dtype, op));
}

void Communicator::all_to_all(const void* send, void* recv, std::size_t count, DataType dtype) {
  run(st(), args(Collective::all_to_all, send, recv, count, dtype));
}

namespace {

// all_to_allv's call; its count, for messages and the call comparisons, is what it sends.
CollArgs all_to_allv_args(const void* send, std::span<const std::size_t> send_counts, void* recv,
                          std::span<const std::size_t> recv_counts, DataType dtype) {
  std::size_t total = 0;
  for (std::size_t c : send_counts) total += c;  // wraps only where validation refuses the sum
  CollArgs a = args(Collective::all_to_allv, send, recv, total, dtype);
  a.counts = send_counts;
  a.recv_counts = recv_counts;
  return a;
}

}  // namespace

void Communicator::all_to_allv(const void* send, std::span<const std::size_t> send_counts,
                               void* recv, std::span<const std::size_t> recv_counts,
                               DataType dtype) {
  run(st(), all_to_allv_args(send, send_counts, recv, recv_counts, dtype));
}

void Communicator::barrier() { run(st(), args(Collective::barrier, nullptr, nullptr, 0, DataType::uint8)); }

void Communicator::check_blocks(const char* op, std::size_t block, std::size_t whole,
                                DataType dtype, const void* send_data, void* recv_data,
                                int root) {
  const auto n = static_cast<std::size_t>(size());
  if (whole / n != block || whole % n != 0) {
    reject_typed(op, block, dtype,
                 "a buffer of " + std::to_string(whole) + " elements where " +
                     std::to_string(n) + " blocks of " + std::to_string(block) + " are needed",
                 root, send_data, recv_data);
  }
}

Request Communicator::iall_reduce(const void* send, void* recv, std::size_t count,
                                  DataType dtype, ReduceOp op) {
  return issue(st(), args(Collective::all_reduce, send, recv, count, dtype, op));
}

Request Communicator::ireduce(const void* send, void* recv, std::size_t count, DataType dtype,
                              ReduceOp op, int root) {
  return issue(st(), args(Collective::reduce, send, recv, count, dtype, op, root));
}

Request Communicator::ibroadcast(void* buf, std::size_t count, DataType dtype, int root) {
  return issue(st(), args(Collective::broadcast, buf, buf, count, dtype, ReduceOp::sum, root));
}

Request Communicator::iall_gather(const void* send, void* recv, std::size_t count,
                                  DataType dtype) {
  return issue(st(), args(Collective::all_gather, send, recv, count, dtype));
}

Request Communicator::igather(const void* send, void* recv, std::size_t count, DataType dtype,
                              int root) {
  return issue(st(), args(Collective::gather, send, recv, count, dtype, ReduceOp::sum, root));
}

Request Communicator::igatherv(const void* send, std::size_t send_count, void* recv,
                               std::span<const std::size_t> recv_counts, DataType dtype,
                               int root) {
  CollArgs a = args(Collective::gatherv, send, recv, send_count, dtype, ReduceOp::sum, root);
  a.counts = recv_counts;
  return issue(st(), std::move(a),
               std::vector<std::size_t>(recv_counts.begin(), recv_counts.end()));
}

Request Communicator::iscatter(const void* send, void* recv, std::size_t count, DataType dtype,
                               int root) {
  return issue(st(), args(Collective::scatter, send, recv, count, dtype, ReduceOp::sum, root));
}

Request Communicator::iscatterv(const void* send, std::span<const std::size_t> send_counts,
                                void* recv, std::size_t recv_count, DataType dtype, int root) {
  CollArgs a = args(Collective::scatterv, send, recv, recv_count, dtype, ReduceOp::sum, root);
  a.counts = send_counts;
  return issue(st(), std::move(a),
               std::vector<std::size_t>(send_counts.begin(), send_counts.end()));
}

Request Communicator::ireduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                      DataType dtype, ReduceOp op) {
  return issue(st(), args(Collective::reduce_scatter, send, recv, recv_count, dtype, op));
}

Request Communicator::iall_to_all(const void* send, void* recv, std::size_t count,
                                  DataType dtype) {
  return issue(st(), args(Collective::all_to_all, send, recv, count, dtype));
}

Request Communicator::iall_to_allv(const void* send, std::span<const std::size_t> send_counts,
                                   void* recv, std::span<const std::size_t> recv_counts,
                                   DataType dtype) {
  return issue(st(), all_to_allv_args(send, send_counts, recv, recv_counts, dtype),
               std::vector<std::size_t>(send_counts.begin(), send_counts.end()),
               std::vector<std::size_t>(recv_counts.begin(), recv_counts.end()));
}

Request Communicator::ibarrier() {
  return issue(st(), args(Collective::barrier, nullptr, nullptr, 0, DataType::uint8));
}

}  // namespace synk
