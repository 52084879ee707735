// See call_check.h.
#include "core/call_check.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backoff.h"
#include "core/env.h"
#include "core/mpi_check.h"
#include "core/mpi_runtime.h"
#include "core/poll_request.h"
#include "core/validation.h"
#include "synk/error.h"

namespace synk::detail {

namespace {

struct CallRecord {
  std::int64_t coll;
  std::int64_t dtype;
  std::int64_t op;
  std::int64_t root;
  std::uint64_t count;
  std::int64_t error_code;  // -1: this rank's arguments passed local validation
  char message[208];
};

std::string describe(const CallRecord& r) {
  return describe_call(static_cast<Collective>(r.coll), r.count, static_cast<DataType>(r.dtype),
                       static_cast<ReduceOp>(r.op), static_cast<int>(r.root));
}

}  // namespace

void validate_across_ranks(const CollArgs& a, const CommContext& ctx) {
  CallRecord mine{};
  mine.coll = static_cast<std::int64_t>(a.coll);
  mine.dtype = static_cast<std::int64_t>(a.dtype);
  mine.op = static_cast<std::int64_t>(a.op);
  mine.root = a.root;
  mine.count = a.count;
  mine.error_code = -1;
  std::optional<Error> local_error;
  try {
    validate(a, ctx);
  } catch (const Error& e) {
    local_error = e;
    mine.error_code = static_cast<std::int64_t>(e.code());
    std::strncpy(mine.message, e.what(), sizeof mine.message - 1);
  }

  // Polled rather than blocking: a rank that never arrives (stopped, or busy in a loop of its
  // own) is a Timeout after SYNK_TIMEOUT, as in the shm backend's waits, not a hang. (With the
  // hier backend this exchange comes first in every call, so it is where such a rank is met.)
  auto sent = std::make_unique<CallRecord>(mine);
  auto all = std::make_unique<std::vector<CallRecord>>(static_cast<std::size_t>(ctx.size));
  MPI_Request req = MPI_REQUEST_NULL;
  SYNK_CHECK_MPI(MPI_Iallgather(sent.get(), sizeof mine, MPI_BYTE, all->data(), sizeof mine,
                                MPI_BYTE, ctx.comm, &req));
  // Spin briefly, then yield for up to 10 ms (a rank on another core or node a little behind).
  const auto limit = std::chrono::steady_clock::now() + wait_duration(settings().timeout_s);
  poll_request(
      req, "MPI_Test(the call comparison's MPI_Iallgather)", std::chrono::microseconds(200),
      std::chrono::milliseconds(10),
      [&] {
        if (std::chrono::steady_clock::now() < limit) return;
        note_peer_lost();
        throw Error(ErrorCode::Timeout,
                    std::string(to_string(a.coll)) + ": waited " +
                        seconds_text(settings().timeout_s) +
                        " (SYNK_TIMEOUT) for every rank to reach this call (the calls are "
                        "compared first); some rank has not");
      },
      [&] {
        // The exchange is still pending: MPI may write to these later, so they are never freed.
        (void)sent.release();
        (void)all.release();
      });

  if (local_error) throw *local_error;
  const std::vector<CallRecord>& records = *all;
  for (int r = 0; r < ctx.size; ++r) {
    if (records[static_cast<std::size_t>(r)].error_code >= 0) {
      throw Error(ErrorCode::Remote, std::string(to_string(a.coll)) + ": rank " +
                                         std::to_string(r) + " rejected its arguments: " +
                                         records[static_cast<std::size_t>(r)].message);
    }
  }

  const CallRecord& first = records[0];
  for (int r = 1; r < ctx.size; ++r) {
    const CallRecord& other = records[static_cast<std::size_t>(r)];
    bool same = other.coll == first.coll && other.dtype == first.dtype;
    const auto c = static_cast<Collective>(first.coll);
    if (uses_op(c)) same = same && other.op == first.op;
    if (has_root(c)) same = same && other.root == first.root;
    if (c != Collective::gatherv) same = same && other.count == first.count;
    if (!same) {
      throw Error(ErrorCode::InvalidUsage, std::string(to_string(a.coll)) +
                                               ": mismatched calls: rank 0 called " +
                                               describe(first) + ", rank " + std::to_string(r) +
                                               " called " + describe(other));
    }
  }

  if (a.coll == Collective::gatherv) {
    // Only the root knows recv_counts: share them so every rank can compare its send count.
    std::vector<std::uint64_t> counts(static_cast<std::size_t>(ctx.size));
    if (ctx.rank == a.root) counts.assign(a.recv_counts.begin(), a.recv_counts.end());
    SYNK_CHECK_MPI(MPI_Bcast(counts.data(), ctx.size, MPI_UINT64_T, a.root, ctx.comm));
    for (int r = 0; r < ctx.size; ++r) {
      if (counts[static_cast<std::size_t>(r)] != records[static_cast<std::size_t>(r)].count) {
        throw Error(ErrorCode::InvalidUsage,
                    "gatherv: rank " + std::to_string(r) + " sends " +
                        std::to_string(records[static_cast<std::size_t>(r)].count) +
                        " elements but the root's recv_counts[" + std::to_string(r) + "] is " +
                        std::to_string(counts[static_cast<std::size_t>(r)]));
      }
    }
  }
}

}  // namespace synk::detail
