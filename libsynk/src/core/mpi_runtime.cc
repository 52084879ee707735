// See mpi_runtime.h.
#include "core/mpi_runtime.h"

#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/job_rank_text.h"
#include "core/logging.h"
#include "core/mpi_check.h"
#include "core/mpi_watchdog.h"

namespace synk::detail {

namespace {

std::atomic<bool> peer_lost{false};
pid_t mpi_started_in = 0;  // the process in which synk started MPI

// Where synk started MPI. Open MPI's MPI_Finalize waits for every rank: a process that exits
// with a failure, or after a peer was lost, skips it, so that it ends and mpirun ends the job
// naming it. (A rank leaving early with an error waited there for the others, stuck in a call
// it had left, until their SYNK_TIMEOUT, and then they were named as failing first.)
void finalize_at_exit(int status, void*) {
  // A child forked after MPI started inherits this handler, but is no rank: MPI_Finalize there
  // waited for the others for ever.
  if (status != 0 || peer_lost.load() || getpid() != mpi_started_in) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// The rank the launcher gave this process, for messages before MPI can say it; -1 if none did.
int launcher_world_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* text = std::getenv(var);
    if (text == nullptr || *text == '\0') continue;
    char* end = nullptr;
    const long rank = std::strtol(text, &end, 10);
    if (*end == '\0' && rank >= 0 && rank <= INT_MAX) return static_cast<int>(rank);
  }
  return -1;
}

// This process's rank in MPI_COMM_WORLD once a communicator was made (-1 before).
std::atomic<int> world_rank{-1};

}  // namespace

int job_rank_of_process() {
  const int known = world_rank.load(std::memory_order_relaxed);
  return known >= 0 ? known : launcher_world_rank();
}

void ensure_mpi_initialized() {
  // MPI_Initialized stays true after MPI_Finalize, so this comes first (else the next MPI call,
  // MPI_Comm_dup, aborted the process).
  if (mpi_is_finalized()) {
    throw Error(ErrorCode::InvalidUsage, "MPI has already been finalized; synk cannot start it again");
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  // A malformed variable starts MPI with the defaults: the settings' agreement at the
  // communicator's start then fails every rank, naming this one, where a refusal here would
  // fail this rank alone and leave the others in MPI_Init_thread.
  const Settings& s = settings_or_defaults();
  const int level = s.mpi_threads == "serialized" ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
  {
    // MPI_Init_thread waits for every rank of the job: one that is late by more than
    // SYNK_TIMEOUT (stuck in its own start-up) ends the others, as a communicator's start does.
    const MpiWatch watch("starting MPI (MPI_Init_thread)", launcher_world_rank(), s.timeout_s);
    SYNK_CHECK_MPI(MPI_Init_thread(nullptr, nullptr, level, &provided));
  }
  mpi_started_in = getpid();
#ifdef __GLIBC__
  on_exit(finalize_at_exit, nullptr);  // (it is told the exit status)
#else
  std::atexit([] { finalize_at_exit(0, nullptr); });
#endif
}

void note_peer_lost() noexcept { peer_lost.store(true); }

bool peer_was_lost() noexcept { return peer_lost.load(); }

bool mpi_allows_threads() {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return level == MPI_THREAD_MULTIPLE;
}

bool mpi_is_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

namespace {

// Where the ranks span nodes: every rank's node and every node's host name, so that a message
// can say where a rank runs ("rank 3 (node 1 on hostB)").
void gather_nodes(CommContext& c) {
  struct Where {
    std::int32_t node;
    char host[60];
  };
  Where mine{};
  mine.node = c.node;
  if (gethostname(mine.host, sizeof mine.host - 1) != 0) mine.host[0] = '\0';
  std::vector<Where> all(static_cast<std::size_t>(c.size));
  SYNK_CHECK_MPI(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE,
                               c.comm));
  c.node_of_rank.resize(all.size());
  c.node_hosts.assign(static_cast<std::size_t>(c.num_nodes), "");
  for (std::size_t r = all.size(); r-- > 0;) {  // a node's first rank names it
    const Where& w = all[r];
    c.node_of_rank[r] = w.node;
    if (w.node >= 0 && w.node < c.num_nodes) {
      c.node_hosts[static_cast<std::size_t>(w.node)] = w.host;
    }
  }
}

// make_context's work after the duplicate: the ranks, the node's ranks (or a simulated node's)
// and the leaders.
void fill_context(CommContext& c, int simulate_nodes) {
  SYNK_CHECK_MPI(MPI_Comm_set_errhandler(c.comm, MPI_ERRORS_RETURN));
  SYNK_CHECK_MPI(MPI_Comm_rank(c.comm, &c.rank));
  SYNK_CHECK_MPI(MPI_Comm_size(c.comm, &c.size));

  MPI_Comm shared = MPI_COMM_NULL;
  SYNK_CHECK_MPI(MPI_Comm_split_type(c.comm, MPI_COMM_TYPE_SHARED, c.rank, MPI_INFO_NULL, &shared));
  if (simulate_nodes > 1) {
    // Contiguous blocks of the real node's ranks become the fake nodes.
    int lr = 0, ls = 1;
    int rc = MPI_Comm_rank(shared, &lr);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(shared, &ls);
    const int fake = static_cast<int>(static_cast<long long>(lr) * simulate_nodes / ls);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_split(shared, fake, lr, &c.local_comm);
    MPI_Comm_free(&shared);
    if (rc != MPI_SUCCESS) {
      throw_mpi_error(rc, "MPI_Comm_split of the node's ranks into SYNK_SIMULATE_NODES nodes");
    }
  } else {
    c.local_comm = shared;
  }
  SYNK_CHECK_MPI(MPI_Comm_set_errhandler(c.local_comm, MPI_ERRORS_RETURN));
  SYNK_CHECK_MPI(MPI_Comm_rank(c.local_comm, &c.local_rank));
  SYNK_CHECK_MPI(MPI_Comm_size(c.local_comm, &c.local_size));

  SYNK_CHECK_MPI(
      MPI_Comm_split(c.comm, c.local_rank == 0 ? 0 : MPI_UNDEFINED, c.rank, &c.leader_comm));
  int node_info[2] = {0, 1};
  if (c.leader_comm != MPI_COMM_NULL) {
    SYNK_CHECK_MPI(MPI_Comm_set_errhandler(c.leader_comm, MPI_ERRORS_RETURN));
    SYNK_CHECK_MPI(MPI_Comm_rank(c.leader_comm, &node_info[0]));
    SYNK_CHECK_MPI(MPI_Comm_size(c.leader_comm, &node_info[1]));
  }
  SYNK_CHECK_MPI(MPI_Bcast(node_info, 2, MPI_INT, 0, c.local_comm));
  c.node = node_info[0];
  c.num_nodes = node_info[1];
  if (c.num_nodes > 1) gather_nodes(c);
  c.job_ranks = ranks_in(c.comm, MPI_COMM_WORLD);
  world_rank.store(c.job_ranks[static_cast<std::size_t>(c.rank)], std::memory_order_relaxed);
  bool same = true;
  for (int r = 0; r < c.size; ++r) same = same && c.job_ranks[static_cast<std::size_t>(r)] == r;
  if (same) c.job_ranks.clear();
  SYNK_LOG_AT(debug, "rank " << c.rank << "/" << c.size << ": local rank " << c.local_rank << "/"
                             << c.local_size << " on node " << c.node << "/" << c.num_nodes);
}

}  // namespace

CommContext make_context(MPI_Comm comm, int simulate_nodes) {
  CommContext c;
  SYNK_CHECK_MPI(MPI_Comm_dup(comm, &c.comm));
  // From here a failure frees what was made (the duplicate and its splits leaked).
  try {
    fill_context(c, simulate_nodes);
  } catch (...) {
    free_context(c);
    throw;
  }
  return c;
}

std::string CommContext::node_text(int n) const {
  const bool known = n >= 0 && static_cast<std::size_t>(n) < node_hosts.size() &&
                     !node_hosts[static_cast<std::size_t>(n)].empty();
  return "node " + std::to_string(n) +
         (known ? " on " + node_hosts[static_cast<std::size_t>(n)] : std::string());
}

std::string CommContext::rank_text(int r, std::optional<int> on_node) const {
  const auto i = static_cast<std::size_t>(r);
  std::string where = i < job_ranks.size() ? job_rank_words(r, job_ranks[i]) : std::string();
  if (on_node) where += (where.empty() ? "" : ", ") + node_text(*on_node);
  return std::to_string(r) + (where.empty() ? "" : " (" + where + ")");
}

std::vector<int> ranks_in(MPI_Comm comm, MPI_Comm other) {
  MPI_Group mine = MPI_GROUP_NULL, theirs = MPI_GROUP_NULL;
  SYNK_CHECK_MPI(MPI_Comm_group(comm, &mine));
  int rc = MPI_Comm_group(other, &theirs);
  int size = 0;
  if (rc == MPI_SUCCESS) rc = MPI_Group_size(mine, &size);
  std::vector<int> in_comm(static_cast<std::size_t>(size)), in_other(in_comm.size());
  for (int r = 0; r < size; ++r) in_comm[static_cast<std::size_t>(r)] = r;
  if (rc == MPI_SUCCESS) {
    rc = MPI_Group_translate_ranks(mine, size, in_comm.data(), theirs, in_other.data());
  }
  MPI_Group_free(&mine);
  if (theirs != MPI_GROUP_NULL) MPI_Group_free(&theirs);
  if (rc != MPI_SUCCESS) throw_mpi_error(rc, "MPI_Group_translate_ranks");
  return in_other;
}

CommContext duplicate_context(const CommContext& ctx) {
  CommContext c = ctx;
  c.comm = c.local_comm = c.leader_comm = MPI_COMM_NULL;
  try {
    SYNK_CHECK_MPI(MPI_Comm_dup(ctx.comm, &c.comm));
    SYNK_CHECK_MPI(MPI_Comm_dup(ctx.local_comm, &c.local_comm));
    if (ctx.leader_comm != MPI_COMM_NULL) {
      SYNK_CHECK_MPI(MPI_Comm_dup(ctx.leader_comm, &c.leader_comm));  // (and its error handler)
    }
  } catch (...) {
    free_context(c);
    throw;
  }
  return c;
}

void free_context(CommContext& c) noexcept {
  if (mpi_is_finalized()) return;
  for (MPI_Comm* m : {&c.leader_comm, &c.local_comm, &c.comm}) {
    if (*m != MPI_COMM_NULL) MPI_Comm_free(m);
  }
}

}  // namespace synk::detail
