// The list collectives of synk/shared_list.h: the ranks compare their lists in one small
// all_reduce, then the arrays travel packed per dtype, up to SYNK_FUSION_BYTES per collective.
#include "synk/shared_list.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kv/kv_settings.h"
#include "synk/error.h"

namespace synk {

namespace detail {

FusedPlan plan_fused(std::span<const SharedRef> list, std::size_t fusion_bytes) {
  FusedPlan plan;
  plan.order.reserve(list.size());
  // The dtypes in the order of their first non-empty array.
  std::vector<DataType> dtypes;
  for (const SharedRef& e : list) {
    if (e.count() != 0 && std::find(dtypes.begin(), dtypes.end(), e.dtype()) == dtypes.end()) {
      dtypes.push_back(e.dtype());
    }
  }
  std::vector<std::size_t> alone;  // one group's arrays of fusion_bytes or kAloneBytes or more
  for (const DataType t : dtypes) {
    alone.clear();
    FusedPlan::Call open{t, plan.order.size(), plan.order.size(), 0};
    std::size_t open_bytes = 0;
    const auto close = [&] {
      if (open.last == open.first) return;
      if (open.last - open.first > 1) plan.pack_bytes = std::max(plan.pack_bytes, open_bytes);
      plan.calls.push_back(open);
      open = FusedPlan::Call{t, open.last, open.last, 0};
      open_bytes = 0;
    };
    for (std::size_t i = 0; i < list.size(); ++i) {
      const SharedRef& e = list[i];
      if (e.count() == 0 || e.dtype() != t) continue;
      const std::size_t bytes = e.bytes();
      if (bytes >= fusion_bytes || bytes >= kAloneBytes) {  // fusion_bytes 0: every array
        alone.push_back(i);
        continue;
      }
      if (open_bytes + bytes > fusion_bytes) close();
      plan.order.push_back(i);
      ++open.last;
      open.count += e.count();
      open_bytes += bytes;
    }
    close();
    for (const std::size_t i : alone) {
      plan.calls.push_back({t, plan.order.size(), plan.order.size() + 1, list[i].count()});
      plan.order.push_back(i);
    }
  }
  return plan;
}

}  // namespace detail

namespace {

// Why a rank cannot run the call, as every rank learns it: an entry (or the call's argument)
// and a reason. Encoded in one word so that a max over the ranks picks the first error of the
// lowest index, then lowest reason, then lowest rank.
enum Reason : std::uint64_t {
  kBadArgument = 0,  // the op (all_reduce) or the root (broadcast); entry index "none"
  kNullEntry = 1,
  kNullData = 2,
  kBadDataType = 3,
  kAvgOnIntegers = 4,
  kOverlap = 5,
};
constexpr std::uint64_t kReasons = 8;

struct LocalError {
  std::uint64_t reason = 0;
  std::size_t index = 0;  // in the list; unused for kBadArgument
  std::string text;       // this rank's message (empty: no error)
};

ErrorCode code_of(std::uint64_t reason) {
  return reason == kOverlap ? ErrorCode::InvalidUsage : ErrorCode::InvalidArgument;
}

std::string entry_text(std::size_t i, std::string_view name) {
  std::string s = "entry " + std::to_string(i);
  if (!name.empty()) s += " ('" + std::string(name) + "')";
  return s;
}

// The text another rank gives for an error it learned only as a reason.
std::string remote_text(std::uint64_t reason, std::size_t i, bool broadcast) {
  switch (reason) {
    case kBadArgument: return broadcast ? "the root is out of range" : "the op is not a ReduceOp";
    case kNullEntry: return entry_text(i, {}) + " is null";
    case kNullData: return entry_text(i, {}) + " has elements but no data";
    case kBadDataType: return entry_text(i, {}) + " has an invalid DataType";
    case kAvgOnIntegers: return entry_text(i, {}) + " is an integer array, which avg cannot take";
    case kOverlap: return entry_text(i, {}) + " overlaps another entry";
    default: return "an invalid list";
  }
}

// The first reason this rank cannot run the call. `arg` is the op (all_reduce) or the root.
LocalError check_local(const char* what, std::span<const SharedRef> list, bool broadcast,
                       long long arg, int size) {
  LocalError err;
  const std::string head = std::string(what) + ": ";
  if (broadcast && (arg < 0 || arg >= size)) {
    err.reason = kBadArgument;
    err.text = head + "root " + std::to_string(arg) + " is out of range for " +
               std::to_string(size) + " ranks (valid: 0.." + std::to_string(size - 1) + ")";
    return err;
  }
  const auto op = static_cast<ReduceOp>(arg);
  if (!broadcast && !is_valid(op)) {
    err.reason = kBadArgument;
    err.text = head + std::to_string(arg) + " is not a ReduceOp";
    return err;
  }
  const auto fail = [&](std::uint64_t reason, std::size_t i, const std::string& why) {
    err.reason = reason;
    err.index = i;
    err.text = head + entry_text(i, list[i].name()) + " " + why;
  };
  for (std::size_t i = 0; i < list.size() && err.text.empty(); ++i) {
    const SharedRef& e = list[i];
    if (e.is_null()) {
      fail(kNullEntry, i, "is null (a null pointer or a default SharedRef)");
    } else if (!is_valid(e.dtype())) {
      fail(kBadDataType, i, "has an invalid DataType (" +
                                std::to_string(static_cast<int>(e.dtype())) + ")");
    } else if (e.data() == nullptr && e.count() != 0) {
      fail(kNullData, i, "has " + std::to_string(e.count()) + " elements but a null data pointer");
    } else if (!broadcast && op == ReduceOp::avg && !is_floating(e.dtype())) {
      fail(kAvgOnIntegers, i, std::string("is an array of ") + to_string(e.dtype()) +
                                  ": avg is an error on integer types (use sum)");
    }
  }
  if (!err.text.empty()) return err;
  // One array twice in the list (or two that overlap) would be reduced once when packed and
  // twice when not: refuse it.
  struct Span {
    std::uintptr_t lo, hi;
    std::size_t i;
  };
  std::vector<Span> spans;
  spans.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i].count() == 0) continue;
    const auto lo = reinterpret_cast<std::uintptr_t>(list[i].data());
    spans.push_back({lo, lo + list[i].bytes(), i});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.lo < b.lo; });
  const Span* widest = nullptr;  // the span reaching furthest so far
  std::size_t first = list.size(), other = 0;
  for (const Span& s : spans) {
    if (widest && s.lo < widest->hi) {
      const std::size_t a = std::max(s.i, widest->i);
      if (a < first) {
        first = a;
        other = std::min(s.i, widest->i);
      }
    }
    if (!widest || s.hi > widest->hi) widest = &s;
  }
  if (first < list.size()) {
    fail(kOverlap, first, "overlaps " + entry_text(other, list[other].name()) +
                              " (an array may appear once in a list)");
  }
  return err;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Every rank learns whether every rank can run the call on a list like its own; if not, every
// rank throws, naming the entry. One all_reduce of 7 words, plus one more only when the lists
// differ.
void agree(Communicator& comm, const char* what, std::span<const SharedRef> list, bool broadcast,
           long long arg) {
  const int size = comm.size();
  const auto n_ranks = static_cast<std::uint64_t>(size);
  const LocalError mine = check_local(what, list, broadcast, arg, size);
  std::uint64_t key = 0;
  if (!mine.text.empty()) {
    const std::uint64_t slot = mine.reason == kBadArgument ? 0 : mine.index + 1;
    key = ~((slot * kReasons + mine.reason) * n_ranks + static_cast<std::uint64_t>(comm.rank()));
  }
  std::uint64_t h = 0x6a09e667f3bcc908ULL;
  for (const SharedRef& e : list) {
    h = mix(h + e.count() * 16 + static_cast<std::uint64_t>(e.dtype()) + 0x9e3779b97f4a7c15ULL);
  }
  const std::uint64_t n = list.size(), a = static_cast<std::uint64_t>(arg);
  std::uint64_t words[7] = {key, n, ~n, h, ~h, a, ~a};
  comm.all_reduce(words, words, 7, DataType::uint64, ReduceOp::max);

  if (words[0] != 0) {
    if (!mine.text.empty()) throw Error(code_of(mine.reason), mine.text);
    const std::uint64_t k = ~words[0];
    const std::uint64_t rank = k % n_ranks, rest = k / n_ranks;
    const std::uint64_t reason = rest % kReasons, slot = rest / kReasons;
    throw Error(code_of(reason),
                std::string(what) + ": rank " + std::to_string(rank) + ": " +
                    remote_text(reason, slot ? static_cast<std::size_t>(slot - 1) : 0, broadcast));
  }
  const std::string head = std::string(what) + ": ";
  const std::string me = "this rank, " + std::to_string(comm.rank());
  if (words[1] != n || words[2] != ~n) {
    throw Error(ErrorCode::InvalidUsage,
                head + "the ranks' lists have different lengths (" + me + ", " +
                    std::to_string(n) + " arrays; the longest " + std::to_string(words[1]) +
                    ", the shortest " + std::to_string(~words[2]) + ")");
  }
  if (words[5] != a || words[6] != ~a) {
    if (broadcast) {
      throw Error(ErrorCode::InvalidUsage,
                  head + "the ranks passed different roots (" + me + ", root " +
                      std::to_string(arg) + "; the largest " + std::to_string(words[5]) +
                      ", the smallest " + std::to_string(~words[6]) + ")");
    }
    const auto other = static_cast<ReduceOp>(words[5] != a ? words[5] : ~words[6]);
    throw Error(ErrorCode::InvalidUsage,
                head + "the ranks passed different ops (" + me + ", " +
                    to_string(static_cast<ReduceOp>(arg)) + "; another " + to_string(other) + ")");
  }
  if (words[3] == h && words[4] == ~h) return;  // the same (dtype, count) list everywhere

  // The lists differ: find the first entry that does, on every rank.
  std::vector<std::uint64_t> per(4 * list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto t = static_cast<std::uint64_t>(list[i].dtype());
    per[4 * i] = list[i].count();
    per[4 * i + 1] = ~per[4 * i];
    per[4 * i + 2] = t;
    per[4 * i + 3] = ~t;
  }
  std::vector<std::uint64_t> most(per.size());
  comm.all_reduce(per.data(), most.data(), per.size(), DataType::uint64, ReduceOp::max);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const SharedRef& e = list[i];
    const std::string where = head + entry_text(i, e.name()) + " differs between the ranks: " + me;
    if (most[4 * i + 2] != per[4 * i + 2] || most[4 * i + 3] != per[4 * i + 3]) {
      const auto other = static_cast<DataType>(most[4 * i + 2] != per[4 * i + 2]
                                                   ? most[4 * i + 2]
                                                   : ~most[4 * i + 3]);
      throw Error(ErrorCode::InvalidUsage, where + ", has " + to_string(e.dtype()) +
                                               " elements; another rank " + to_string(other));
    }
    if (most[4 * i] != per[4 * i] || most[4 * i + 1] != per[4 * i + 1]) {
      throw Error(ErrorCode::InvalidUsage,
                  where + ", has " + std::to_string(e.count()) + " elements; the ranks have from " +
                      std::to_string(~most[4 * i + 1]) + " to " + std::to_string(most[4 * i]) +
                      " (the arrays must have the same sizes on every rank)");
    }
  }
  throw Error(ErrorCode::InvalidUsage, head + "the ranks' lists differ");  // a mix collision
}

// Runs fn(data, count, dtype) once per call of the plan; packed calls go through one buffer
// that pack_in fills before and unpack_out empties after (as the collective needs).
template <class Fn>
void run_plan(std::span<const SharedRef> list, bool pack_in, bool unpack_out, Fn&& fn) {
  const detail::FusedPlan plan = detail::plan_fused(list, detail::kv_settings().fusion_bytes);
  std::vector<std::uint64_t> pack((plan.pack_bytes + 7) / 8);  // 8-byte aligned
  auto* base = reinterpret_cast<unsigned char*>(pack.data());
  for (const detail::FusedPlan::Call& c : plan.calls) {
    if (c.last - c.first == 1) {  // alone: in place
      const SharedRef& e = list[plan.order[c.first]];
      fn(e.data(), e.count(), e.dtype());
      continue;
    }
    if (pack_in) {
      unsigned char* p = base;
      for (std::size_t k = c.first; k < c.last; ++k) {
        const SharedRef& e = list[plan.order[k]];
        std::memcpy(p, e.data(), e.bytes());
        p += e.bytes();
      }
    }
    fn(base, c.count, c.dtype);
    if (unpack_out) {
      const unsigned char* p = base;
      for (std::size_t k = c.first; k < c.last; ++k) {
        const SharedRef& e = list[plan.order[k]];
        std::memcpy(e.data(), p, e.bytes());
        p += e.bytes();
      }
    }
  }
}

}  // namespace

void all_reduce(Communicator& comm, std::span<const SharedRef> list, ReduceOp op) {
  agree(comm, "all_reduce(list)", list, false, static_cast<long long>(op));
  run_plan(list, true, true, [&](void* p, std::size_t count, DataType t) {
    comm.all_reduce(p, p, count, t, op);
  });
}

void all_reduce(Communicator& comm, std::initializer_list<SharedRef> list, ReduceOp op) {
  all_reduce(comm, std::span<const SharedRef>(list.begin(), list.size()), op);
}

void broadcast(Communicator& comm, std::span<const SharedRef> list, int root) {
  agree(comm, "broadcast(list)", list, true, root);
  const bool at_root = comm.rank() == root;
  run_plan(list, at_root, !at_root, [&](void* p, std::size_t count, DataType t) {
    comm.broadcast(p, count, t, root);
  });
}

void broadcast(Communicator& comm, std::initializer_list<SharedRef> list, int root) {
  broadcast(comm, std::span<const SharedRef>(list.begin(), list.size()), root);
}

}  // namespace synk
