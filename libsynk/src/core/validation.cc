// Argument checks for every collective; see validation.h.
#include "core/validation.h"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <utility>

#include "synk/error.h"

namespace synk::detail {

std::optional<std::size_t> bytes_in_memory(std::size_t count, std::size_t factor, DataType t) {
  const std::size_t max = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  std::size_t elems = 0, bytes = 0;  // overflow checks without divisions: this runs every call
  if (__builtin_mul_overflow(count, factor, &elems) ||
      __builtin_mul_overflow(elems, size_of(t), &bytes) || bytes > max) {
    return std::nullopt;
  }
  return bytes;
}

namespace {

std::string ptr_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

[[noreturn]] void fail(ErrorCode code, const CollArgs& a, const std::string& what) {
  throw Error(code, std::string(to_string(a.coll)) + ": " + what);
}

// count * factor * esize without overflow, or an error.
std::size_t bytes_of(const CollArgs& a, std::size_t count, std::size_t factor) {
  if (const std::optional<std::size_t> bytes = bytes_in_memory(count, factor, a.dtype)) {
    return *bytes;
  }
  fail(ErrorCode::InvalidArgument, a,
       "count " + std::to_string(count) + " x " + std::to_string(factor) + " elements of " +
           to_string(a.dtype) + " does not fit in memory");
}

// The name of the user's counts argument, for messages.
const char* counts_name(Collective c) {
  return c == Collective::scatterv || c == Collective::all_to_allv ? "send_counts"
                                                                    : "recv_counts";
}

// The elements of `counts` (named `name` in messages) in all.
std::size_t sum_of(const CollArgs& a, std::span<const std::size_t> counts, const char* name) {
  std::size_t total = 0;
  for (std::size_t c : counts) {
    if (c > std::numeric_limits<std::size_t>::max() - total) {
      fail(ErrorCode::InvalidArgument, a, std::string("the sum of ") + name + " overflows size_t");
    }
    total += c;
  }
  return total;
}

// The elements of gatherv's recv or scatterv's send at the root, all_to_allv's send.
std::size_t sum_of_counts(const CollArgs& a) { return sum_of(a, a.counts, counts_name(a.coll)); }

}  // namespace

BufferExtent buffer_extent(const CollArgs& a, const CommContext& ctx) {
  const std::size_t n = static_cast<std::size_t>(ctx.size);
  const bool root = ctx.rank == a.root;
  BufferExtent e;
  switch (a.coll) {
    case Collective::all_reduce:
      e.send_bytes = e.recv_bytes = bytes_of(a, a.count, 1);
      break;
    case Collective::reduce:
      e.send_bytes = bytes_of(a, a.count, 1);
      e.recv_bytes = root ? e.send_bytes : 0;
      break;
    case Collective::broadcast:
      e.recv_bytes = bytes_of(a, a.count, 1);
      break;
    case Collective::all_gather:
      e.send_bytes = bytes_of(a, a.count, 1);
      e.recv_bytes = bytes_of(a, a.count, n);
      break;
    case Collective::gather:
      e.send_bytes = bytes_of(a, a.count, 1);
      e.recv_bytes = root ? bytes_of(a, a.count, n) : 0;
      break;
    case Collective::gatherv:
      e.send_bytes = bytes_of(a, a.count, 1);
      if (root) e.recv_bytes = bytes_of(a, sum_of_counts(a), 1);
      break;
    case Collective::scatter:
      e.send_bytes = root ? bytes_of(a, a.count, n) : 0;
      e.recv_bytes = bytes_of(a, a.count, 1);
      break;
    case Collective::scatterv:
      e.send_bytes = root ? bytes_of(a, sum_of_counts(a), 1) : 0;
      e.recv_bytes = bytes_of(a, a.count, 1);
      break;
    case Collective::reduce_scatter:
      e.send_bytes = bytes_of(a, a.count, n);
      e.recv_bytes = bytes_of(a, a.count, 1);
      break;
    case Collective::all_to_all:
      e.send_bytes = e.recv_bytes = bytes_of(a, a.count, n);
      break;
    case Collective::all_to_allv:
      e.send_bytes = bytes_of(a, sum_of_counts(a), 1);
      e.recv_bytes = bytes_of(a, sum_of(a, a.recv_counts, "recv_counts"), 1);
      break;
    case Collective::barrier:
      break;
  }
  return e;
}

namespace {

// The dtype, and the op where the collective takes one.
void check_dtype_and_op(const CollArgs& a) {
  if (a.typed_error) fail(ErrorCode::InvalidArgument, a, *a.typed_error);
  if (!is_valid(a.dtype)) {
    fail(ErrorCode::InvalidArgument, a,
         "dtype " + std::to_string(static_cast<int>(a.dtype)) + " is not a synk::DataType");
  }
  if (!uses_op(a.coll)) return;
  if (!is_valid(a.op)) {
    fail(ErrorCode::InvalidArgument, a,
         "op " + std::to_string(static_cast<int>(a.op)) + " is not a synk::ReduceOp");
  }
  if (a.op == ReduceOp::avg && !is_floating(a.dtype)) {
    fail(ErrorCode::InvalidArgument, a,
         std::string("op avg is not defined for integer dtype ") + to_string(a.dtype) +
             " (it would truncate); use sum and divide");
  }
}

// all_to_allv's counts: one per rank each, and what this rank sends itself it receives.
void check_all_to_allv_counts(const CollArgs& a, const CommContext& ctx) {
  const auto n = static_cast<std::size_t>(ctx.size);
  for (const auto& [counts, name] : {std::pair{a.counts, "send_counts"},
                                     std::pair{a.recv_counts, "recv_counts"}}) {
    if (counts.size() != n) {
      fail(ErrorCode::InvalidArgument, a,
           std::string(name) + " has " + std::to_string(counts.size()) +
               " entries, expected one per rank (" + std::to_string(ctx.size) + ")");
    }
  }
  const auto me = static_cast<std::size_t>(ctx.rank);
  if (a.counts[me] != a.recv_counts[me]) {
    fail(ErrorCode::InvalidArgument, a,
         "send_counts[" + std::to_string(me) + "] is " + std::to_string(a.counts[me]) +
             " but recv_counts[" + std::to_string(me) + "] is " +
             std::to_string(a.recv_counts[me]) + ": what a rank sends itself it receives");
  }
}

// The root, and gatherv's recv_counts (scatterv's send_counts) at the root.
void check_root_and_counts(const CollArgs& a, const CommContext& ctx) {
  if (a.coll == Collective::all_to_allv) return check_all_to_allv_counts(a, ctx);
  if (has_root(a.coll) && (a.root < 0 || a.root >= ctx.size)) {
    fail(ErrorCode::InvalidArgument, a,
         "root " + std::to_string(a.root) + " is out of range for " + std::to_string(ctx.size) +
             " ranks (valid: 0.." + std::to_string(ctx.size - 1) + ")");
  }
  if (!has_counts(a.coll) || ctx.rank != a.root) return;
  const char* name = counts_name(a.coll);
  if (a.counts.size() != static_cast<std::size_t>(ctx.size)) {
    fail(ErrorCode::InvalidArgument, a,
         std::string(name) + " has " + std::to_string(a.counts.size()) + " entries at the root, " +
             "expected one per rank (" + std::to_string(ctx.size) + ")");
  }
  if (a.counts[static_cast<std::size_t>(ctx.rank)] != a.count) {
    fail(ErrorCode::InvalidArgument, a,
         std::string("the root ") + (a.coll == Collective::gatherv ? "sends " : "receives ") +
             std::to_string(a.count) + " elements but " + name + "[" + std::to_string(ctx.rank) +
             "] is " + std::to_string(a.counts[static_cast<std::size_t>(ctx.rank)]));
  }
}

// In place is allowed only in the NCCL positions; any other overlap would make the result
// depend on the backend's algorithm.
void check_overlap(const CollArgs& a, const CommContext& ctx, const BufferExtent& e) {
  const auto s = reinterpret_cast<std::uintptr_t>(a.send);
  const auto r = reinterpret_cast<std::uintptr_t>(a.recv);
  if (s >= r + e.recv_bytes || r >= s + e.send_bytes) return;  // disjoint
  const std::string buffers = "send " + ptr_text(a.send) + " (" + std::to_string(e.send_bytes) +
                              " bytes) and recv " + ptr_text(a.recv) + " (" +
                              std::to_string(e.recv_bytes) + " bytes) overlap";
  if (a.coll == Collective::all_to_all || a.coll == Collective::all_to_allv) {
    // a block would be overwritten before it is sent
    fail(ErrorCode::InvalidUsage, a, buffers + ", and " + to_string(a.coll) + " has no in place");
  }
  const std::size_t es = size_of(a.dtype);
  std::uintptr_t expected_send = r, expected_recv = s;
  const char* rule = "send == recv";
  switch (a.coll) {
    case Collective::all_gather:
      expected_send = r + static_cast<std::uintptr_t>(ctx.rank) * a.count * es;
      rule = "send == recv + rank * count";
      break;
    case Collective::gather:
      expected_send = r + static_cast<std::uintptr_t>(a.root) * a.count * es;
      rule = "send == recv + root * count";
      break;
    case Collective::gatherv: {
      const std::size_t displ = std::accumulate(a.counts.begin(),
                                                a.counts.begin() + a.root, std::size_t{0});
      expected_send = r + displ * es;
      rule = "send == recv + (sum of recv_counts before the root)";
      break;
    }
    case Collective::scatter:
      expected_recv = s + static_cast<std::uintptr_t>(a.root) * a.count * es;
      rule = "recv == send + root * count";
      break;
    case Collective::scatterv: {
      const std::size_t displ = std::accumulate(a.counts.begin(),
                                                a.counts.begin() + a.root, std::size_t{0});
      expected_recv = s + displ * es;
      rule = "recv == send + (sum of send_counts before the root)";
      break;
    }
    case Collective::reduce_scatter:
      expected_recv = s + static_cast<std::uintptr_t>(ctx.rank) * a.count * es;
      rule = "recv == send + rank * recv_count";
      break;
    default:
      break;
  }
  const bool send_side = a.coll == Collective::scatter || a.coll == Collective::scatterv ||
                         a.coll == Collective::reduce_scatter;
  const bool ok = send_side ? r == expected_recv : s == expected_send;
  if (!ok) {
    fail(ErrorCode::InvalidUsage, a,
         buffers + " but are not in place (in place means " + rule + ")");
  }
}

}  // namespace

void validate(const CollArgs& a, const CommContext& ctx) {
  check_dtype_and_op(a);
  check_root_and_counts(a, ctx);
  const BufferExtent e = buffer_extent(a, ctx);
  const char* send_name = a.coll == Collective::broadcast ? "buf" : "send";
  const char* recv_name = a.coll == Collective::broadcast ? "buf" : "recv";
  if (e.send_bytes > 0 && a.send == nullptr) {
    fail(ErrorCode::InvalidArgument, a,
         std::string(send_name) + " is null but " + std::to_string(e.send_bytes) +
             " bytes are to be sent (count " + std::to_string(a.count) + ")");
  }
  if (e.recv_bytes > 0 && a.recv == nullptr) {
    fail(ErrorCode::InvalidArgument, a,
         std::string(recv_name) + " is null but " + std::to_string(e.recv_bytes) +
             " bytes are to be received (count " + std::to_string(a.count) + ")");
  }
  if (e.send_bytes > 0 && e.recv_bytes > 0) check_overlap(a, ctx, e);
}

}  // namespace synk::detail
