// See call_check.h.
#include "core/call_check.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/backoff.h"
#include "core/call_label.h"
#include "core/env.h"
#include "core/logging.h"
#include "core/mpi_check.h"
#include "core/mpi_runtime.h"
#include "core/mpi_tags.h"
#include "core/poll_request.h"
#include "core/validation.h"
#include "synk/agreement.h"
#include "synk/error.h"

namespace synk::detail {

namespace {

using Clock = std::chrono::steady_clock;

// Notices of arrival travel point to point on the communicator, with a tag of their own
// (mpi_tags.h).

struct CallRecord {
  std::int32_t coll;
  std::int32_t dtype;
  std::int32_t op;
  std::int32_t root;
  std::int32_t error_code;  // -1: this rank's arguments passed local validation
  std::int32_t node;        // this rank's (possibly simulated) node, for Timeout messages
  std::int32_t label;       // CallLabel: what the call is part of, when synk made it
  std::int32_t unused;
  std::uint64_t count;
  std::uint64_t notices;    // notices of arrival this rank had sent each other rank before
};
// Every checked call exchanges one record per rank: a rejection's text travels only when there
// is one (synk/agreement.h).
static_assert(sizeof(CallRecord) == 48, "one small record per rank, without padding");

// What this rank's error names: the collective, or the call of synk's it is part of.
std::string call_title(const CollArgs& a) {
  const std::string label = to_string(a.label);
  return label.empty() ? to_string(a.coll) : label;
}

std::string describe(const CallRecord& r) {
  return labeled_call(static_cast<CallLabel>(r.label),
                      describe_call(static_cast<Collective>(r.coll), r.count,
                                    static_cast<DataType>(r.dtype), static_cast<ReduceOp>(r.op),
                                    static_cast<int>(r.root)));
}

// The all-gather of the records cannot tell a waiting rank which ranks are missing. So a rank
// that has waited a while (slow_after) tells every other rank that it waits in comparison k; at
// the deadline the ranks it has heard nothing from are the ones that never came. A comparison
// that ends quickly sends nothing, and receives only what the records say was sent to it.
struct Arrivals {
  struct Batch {
    std::unique_ptr<std::uint64_t> seq;  // the payload, alive until every send is done
    std::vector<MPI_Request> sends;
  };
  std::uint64_t seq = 0;               // comparisons this rank has entered on the communicator
  std::uint64_t sent = 0;              // notices this rank has sent each other rank
  std::uint64_t received = 0;          // notices it has received, from all ranks
  std::vector<std::uint64_t> reached;  // per rank: the latest comparison it said it waits in
  std::vector<int> node;               // per rank, once a comparison completed (empty before)
  std::vector<Batch> sending;          // notices whose sends are not known to be done
  // The call whose comparison this rank gave up on (a Timeout, an MPI error: its all-gather
  // left posted), or "": no later call can be compared (a late rank's record would complete
  // the abandoned one).
  std::string gave_up_on;
};

// Drops the batches whose sends are done; with `give_up`, frees the others' requests too and
// leaves their payload to MPI, which may still read it.
void reap(Arrivals& st, bool give_up) {
  std::erase_if(st.sending, [&](Arrivals::Batch& b) {
    int done = 0;
    if (MPI_Testall(static_cast<int>(b.sends.size()), b.sends.data(), &done,
                    MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      done = 0;
    }
    if (done || !give_up) return done != 0;
    for (MPI_Request& r : b.sends) {
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    }
    (void)b.seq.release();
    return true;
  });
}

// The attribute's delete callback: the communicator is being freed.
int delete_arrivals(MPI_Comm, int, void* attr, void*) {
  auto* st = static_cast<Arrivals*>(attr);
  reap(*st, true);
  delete st;
  return MPI_SUCCESS;
}

// This rank's Arrivals on ctx.comm, kept as an MPI attribute so that it lives and dies with the
// communicator (a copy of it, MPI_Comm_dup, starts with none).
Arrivals& arrivals_of(const CommContext& ctx) {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID;
    SYNK_CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_arrivals, &k, nullptr));
    return k;
  }();
  void* attr = nullptr;
  int found = 0;
  SYNK_CHECK_MPI(MPI_Comm_get_attr(ctx.comm, keyval, &attr, &found));
  if (found) return *static_cast<Arrivals*>(attr);
  auto st = std::make_unique<Arrivals>();
  st->reached.assign(static_cast<std::size_t>(ctx.size), 0);
  SYNK_CHECK_MPI(MPI_Comm_set_attr(ctx.comm, keyval, st.get()));
  return *st.release();
}

// Tells every other rank that this one waits in comparison st.seq.
void announce(Arrivals& st, const CommContext& ctx) {
  reap(st, false);
  Arrivals::Batch b{std::make_unique<std::uint64_t>(st.seq), {}};
  b.sends.reserve(static_cast<std::size_t>(ctx.size));
  for (int r = 0; r < ctx.size; ++r) {
    if (r == ctx.rank) continue;
    MPI_Request req = MPI_REQUEST_NULL;
    const int rc = MPI_Isend(b.seq.get(), 1, MPI_UINT64_T, r, kArrivalTag, ctx.comm, &req);
    if (rc != MPI_SUCCESS) {
      st.sending.push_back(std::move(b));  // the sends already started keep their payload
      throw_mpi_error(rc, "MPI_Isend of the call comparison's notice of arrival");
    }
    b.sends.push_back(req);
  }
  st.sending.push_back(std::move(b));
  ++st.sent;
  SYNK_LOG_AT(debug, "call comparison " << st.seq << ": still waiting; told the other ranks that "
                                        "this one has arrived");
}

// Takes in every notice of arrival that has come, from any comparison.
void take_notices(Arrivals& st, const CommContext& ctx) {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    int rc = MPI_Iprobe(MPI_ANY_SOURCE, kArrivalTag, ctx.comm, &flag, &status);
    if (rc != MPI_SUCCESS) throw_mpi_error(rc, "MPI_Iprobe for the call comparison's notices");
    if (!flag) return;
    std::uint64_t k = 0;
    rc = MPI_Recv(&k, 1, MPI_UINT64_T, status.MPI_SOURCE, kArrivalTag, ctx.comm,
                  MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) throw_mpi_error(rc, "MPI_Recv of a call comparison's notice");
    std::uint64_t& seen = st.reached[static_cast<std::size_t>(status.MPI_SOURCE)];
    seen = std::max(seen, k);
    ++st.received;
  }
}

// "3 (node 1 on hostB)" where the ranks span nodes; on one node "3 (node 0)" once a comparison
// has told this rank the nodes, "3" before.
std::string with_node(const Arrivals& st, const CommContext& ctx, int r) {
  const auto i = static_cast<std::size_t>(r);
  if (i < ctx.node_of_rank.size()) return ctx.rank_text(r, ctx.node_of_rank[i]);
  if (i < st.node.size()) return ctx.rank_text(r, st.node[i]);
  return ctx.rank_text(r);
}

// The Timeout of a comparison that has not completed, naming the ranks that never said they
// reached it (at most 8 of them, then how many more).
// "rank 3 (node 1), which has" or "ranks 1 and 3 ..., which have": the ranks that have not said
// they reached the call; empty if every one has.
std::string missing_ranks_text(const Arrivals& st, const CommContext& ctx) {
  std::vector<int> missing;
  for (int r = 0; r < ctx.size; ++r) {
    if (r != ctx.rank && st.reached[static_cast<std::size_t>(r)] < st.seq) missing.push_back(r);
  }
  if (missing.empty()) return "";
  const std::size_t shown = std::min<std::size_t>(missing.size(), 8);
  std::string text = missing.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < shown; ++i) {
    if (i > 0) text += i + 1 == shown && shown == missing.size() ? " and " : ", ";
    text += with_node(st, ctx, missing[i]);
  }
  if (shown < missing.size()) text += " and " + std::to_string(missing.size() - shown) + " more";
  return text + (missing.size() == 1 ? ", which has" : ", which have");
}

Error missing_ranks_error(const Arrivals& st, const CommContext& ctx, const CallRecord& mine,
                          bool at_issue) {
  std::string text = describe(mine) + ": rank " + ctx.rank_text(ctx.rank) + " waited " +
                     seconds_text(settings().timeout_s) + " (SYNK_TIMEOUT) for ";
  const std::string missing = missing_ranks_text(st, ctx);
  if (missing.empty()) {
    return Error(ErrorCode::Timeout,
                 text + "every rank to reach this call (the calls are compared first): each has "
                        "said it did, but the comparison has not completed");
  }
  return Error(ErrorCode::Timeout, text + missing +
                                       " not reached this call (the calls are compared first)" +
                                       (at_issue ? kAtIssueHint : ""));
}

// SYNK_STALL_WARN's one line for a comparison still waiting (it may yet complete).
void warn_comparison_stalled(const Arrivals& st, const CommContext& ctx, const CallRecord& mine) {
  const std::string missing = missing_ranks_text(st, ctx);
  SYNK_LOG_AT(warn, describe(mine) << ": rank " << ctx.rank << " has waited "
                                   << seconds_text(settings().stall_warn_s)
                                   << " (SYNK_STALL_WARN) for "
                                   << (missing.empty() ? "some rank, which has" : missing)
                                   << " not reached this call (the calls are compared first); "
                                      "it fails after "
                                   << seconds_text(settings().timeout_s) << " (SYNK_TIMEOUT)");
}

// Waits for the all-gather `req` of the records. Polled rather than blocking: a rank that never
// arrives (stopped, or busy in a loop of its own) is a Timeout after SYNK_TIMEOUT, as in the shm
// backend's waits, not a hang. (With the hier backend this exchange comes first in every call,
// so it is where such a rank is met.)
void wait_for_records(MPI_Request& req, Arrivals& st, const CommContext& ctx,
                      const CallRecord& mine, bool at_issue, std::unique_ptr<CallRecord>& sent,
                      std::unique_ptr<std::vector<CallRecord>>& all) {
  const double timeout_s = settings().timeout_s;
  const auto start = Clock::now();
  const auto limit = start + wait_duration(timeout_s);
  // Long enough that ordinary waits for a slower rank send nothing. A rank that arrived just
  // before the deadline announces itself at most slow_after later: the grace waits for that.
  const Clock::duration slow_after =
      std::clamp<Clock::duration>(wait_duration(timeout_s / 100), std::chrono::milliseconds(10),
                                  std::chrono::seconds(1));
  const auto give_up = limit + slow_after + std::chrono::milliseconds(100);
  bool announced = false;
  bool warn_pending = settings().stall_warn_s < timeout_s;
  // Once the ranks that arrived have had time to say so, so that it names only missing ones.
  const auto warn_at = start + wait_duration(settings().stall_warn_s) + slow_after;
  // Spin briefly, then yield for up to 10 ms (a rank on another core or node a little behind).
  poll_request(
      req, "MPI_Test of the call comparison's MPI_Iallgather", std::chrono::microseconds(200),
      std::chrono::milliseconds(10),
      [&] {
        const auto now = Clock::now();
        if (!announced && now >= start + slow_after) {
          announce(st, ctx);
          announced = true;
        }
        if (announced) take_notices(st, ctx);
        if (warn_pending && announced && now >= warn_at) {
          warn_pending = false;
          warn_comparison_stalled(st, ctx, mine);
        }
        if (now < give_up) return;
        note_peer_lost();
        throw missing_ranks_error(st, ctx, mine, at_issue);
      },
      [&] {
        // The exchange is still pending: MPI may write to these later, so they are never freed.
        (void)sent.release();
        (void)all.release();
        st.gave_up_on = describe(mine);
      });
}

// Where a rank rejected its arguments, the first such rank's text reaches every rank: it throws
// its own error, and the others a Remote one naming it.
void throw_if_rejected(const CollArgs& a, const CommContext& ctx,
                       const std::vector<CallRecord>& records,
                       const std::optional<Error>& local_error) {
  int first = -1;
  for (int r = 0; r < ctx.size && first < 0; ++r) {
    if (records[static_cast<std::size_t>(r)].error_code >= 0) first = r;
  }
  if (first < 0) return;
  const std::string text = text_from(ctx.comm, first, local_error ? local_error->message() : "");
  if (local_error) throw *local_error;
  throw Error(ErrorCode::Remote, std::string(to_string(a.coll)) + ": rank " +
                                     std::to_string(first) + " rejected its arguments: " + text);
}

// all_to_allv: rank r's recv_counts[q] must be rank q's send_counts[r]. Each rank learns what
// every rank sends it (an MPI_Alltoall of a count per pair) and checks its own; the first
// disagreement anywhere (by receiving rank, then sender) fails the call on every rank alike.
void compare_pairs(const CollArgs& a, const CommContext& ctx) {
  const auto n = static_cast<std::size_t>(ctx.size);
  std::vector<std::uint64_t> sends(a.counts.begin(), a.counts.end()), sent_here(n);
  SYNK_CHECK_MPI(MPI_Alltoall(sends.data(), 1, MPI_UINT64_T, sent_here.data(), 1, MPI_UINT64_T,
                              ctx.comm));
  std::uint64_t first = n * n;  // receiver * n + sender of this rank's first disagreement
  for (std::size_t q = 0; q < n && first == n * n; ++q) {
    if (sent_here[q] != a.recv_counts[q]) first = static_cast<std::size_t>(ctx.rank) * n + q;
  }
  SYNK_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_UINT64_T, MPI_MIN, ctx.comm));
  if (first == n * n) return;
  const auto receiver = static_cast<int>(first / n), sender = static_cast<int>(first % n);
  std::uint64_t values[2] = {sent_here[first % n], a.recv_counts[first % n]};
  SYNK_CHECK_MPI(MPI_Bcast(values, 2, MPI_UINT64_T, receiver, ctx.comm));
  throw Error(ErrorCode::InvalidUsage,
              "all_to_allv: rank " + std::to_string(sender) + " sends " +
                  std::to_string(values[0]) + " elements to rank " + std::to_string(receiver) +
                  " but rank " + std::to_string(receiver) + "'s recv_counts[" +
                  std::to_string(sender) + "] is " + std::to_string(values[1]));
}

// Whether two ranks' records are the same call (gatherv's and scatterv's counts may differ).
bool same_call(const CallRecord& x, const CallRecord& y) {
  const auto c = static_cast<Collective>(x.coll);
  return x.coll == y.coll && x.label == y.label && x.dtype == y.dtype &&
         (!uses_op(c) || x.op == y.op) &&
         (!has_root(c) || x.root == y.root) && (counts_differ(c) || x.count == y.count);
}

// "rank 3", "ranks 0 and 2", "ranks 1-3, 5 and 7": sorted ranks, runs of 3 or more shortened.
std::string ranks_text(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (j >= i + 2) {
      parts.push_back(std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]));
    } else {
      for (std::size_t k = i; k <= j; ++k) parts.push_back(std::to_string(ranks[k]));
    }
    i = j + 1;
  }
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) text += i + 1 == parts.size() ? " and " : ", ";
    text += parts[i];
  }
  return text;
}

// The records' verdict on calls that every rank accepted: where they differ, every rank throws
// naming each call and the ranks that made it ("ranks 0 and 2 called ..., ranks 1 and 3 ...").
void compare_records(const CollArgs& a, const std::vector<CallRecord>& records) {
  std::vector<std::pair<const CallRecord*, std::vector<int>>> calls;
  for (std::size_t r = 0; r < records.size(); ++r) {
    auto it = std::find_if(calls.begin(), calls.end(),
                           [&](const auto& g) { return same_call(*g.first, records[r]); });
    if (it == calls.end()) it = calls.insert(calls.end(), {&records[r], {}});
    it->second.push_back(static_cast<int>(r));
  }
  if (calls.size() == 1) return;
  constexpr std::size_t kShown = 4;
  std::string text = call_title(a) + ": mismatched calls: ";
  for (std::size_t i = 0; i < std::min(calls.size(), kShown); ++i) {
    if (i > 0) text += ", ";
    text += ranks_text(calls[i].second) + " called " + describe(*calls[i].first);
  }
  if (calls.size() > kShown) {
    text += ", and " + std::to_string(calls.size() - kShown) + " other calls";
  }
  throw Error(ErrorCode::InvalidUsage, text);
}

// Only the root knows gatherv's recv_counts (scatterv's send_counts): share them so every rank
// can compare its own count.
void compare_counts(const CollArgs& a, const CommContext& ctx,
                    const std::vector<CallRecord>& records) {
  const bool gatherv = a.coll == Collective::gatherv;
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(ctx.size));
  if (ctx.rank == a.root) counts.assign(a.counts.begin(), a.counts.end());
  SYNK_CHECK_MPI(MPI_Bcast(counts.data(), ctx.size, MPI_UINT64_T, a.root, ctx.comm));
  for (int r = 0; r < ctx.size; ++r) {
    if (counts[static_cast<std::size_t>(r)] != records[static_cast<std::size_t>(r)].count) {
      throw Error(ErrorCode::InvalidUsage,
                  std::string(gatherv ? "gatherv" : "scatterv") + ": rank " + std::to_string(r) +
                      (gatherv ? " sends " : " receives ") +
                      std::to_string(records[static_cast<std::size_t>(r)].count) +
                      " elements but the root's " + (gatherv ? "recv_counts[" : "send_counts[") +
                      std::to_string(r) + "] is " + std::to_string(counts[static_cast<std::size_t>(r)]));
    }
  }
}

}  // namespace

void validate_across_ranks(const CollArgs& a, const CommContext& ctx) {
  CallRecord mine{};
  mine.coll = static_cast<std::int32_t>(a.coll);
  mine.dtype = static_cast<std::int32_t>(a.dtype);
  mine.op = static_cast<std::int32_t>(a.op);
  mine.root = a.root;
  mine.count = a.count;
  mine.error_code = -1;
  mine.node = ctx.node;
  mine.label = static_cast<std::int32_t>(a.label);
  std::optional<Error> local_error;
  try {
    validate(a, ctx);
  } catch (const Error& e) {
    local_error = e;
    mine.error_code = static_cast<std::int32_t>(e.code());
  }

  Arrivals& st = arrivals_of(ctx);
  if (!st.gave_up_on.empty()) {
    throw Error(ErrorCode::InvalidUsage,
                call_title(a) + ": the comparison of an earlier call (" +
                    st.gave_up_on + ") did not complete (a Timeout, or an MPI error), so no "
                                    "later call can be compared: create a new communicator");
  }
  ++st.seq;
  mine.notices = st.sent;
  auto sent = std::make_unique<CallRecord>(mine);
  auto all = std::make_unique<std::vector<CallRecord>>(static_cast<std::size_t>(ctx.size));
  MPI_Request req = MPI_REQUEST_NULL;
  SYNK_CHECK_MPI(MPI_Iallgather(sent.get(), sizeof mine, MPI_BYTE, all->data(), sizeof mine,
                                MPI_BYTE, ctx.comm, &req));
  wait_for_records(req, st, ctx, mine, a.at_issue, sent, all);
  // The notices the others say they sent this rank are taken in (those still on their way, at a
  // later comparison), so none piles up in MPI's queue; when none was sent, nothing is asked.
  std::uint64_t owed = 0;
  for (const CallRecord& r : *all) owed += r.notices;
  if (owed - mine.notices > st.received) take_notices(st, ctx);
  if (!st.sending.empty()) reap(st, false);
  if (st.node.empty()) {
    st.node.resize(static_cast<std::size_t>(ctx.size));
    for (std::size_t r = 0; r < st.node.size(); ++r) st.node[r] = (*all)[r].node;
  }

  throw_if_rejected(a, ctx, *all, local_error);
  compare_records(a, *all);
  if (has_counts(a.coll)) compare_counts(a, ctx, *all);
  if (a.coll == Collective::all_to_allv) compare_pairs(a, ctx);
}

}  // namespace synk::detail
