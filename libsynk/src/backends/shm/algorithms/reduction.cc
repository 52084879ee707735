// See reduction.h.
#include "backends/shm/algorithms/reduction.h"

#include <algorithm>

#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void slice(int peer, int n, std::size_t count, std::size_t es, std::size_t* lo, std::size_t* hi) {
  const std::size_t unit = 64 / es;
  const std::size_t units = (count + unit - 1) / unit;
  const std::size_t ranks = static_cast<std::size_t>(n);
  const std::size_t q = static_cast<std::size_t>(peer);
  *lo = std::min(count, units * q / ranks * unit);
  *hi = std::min(count, units * (q + 1) / ranks * unit);
}

void reduce_slice(Parts& p, std::size_t lo, std::size_t hi, std::size_t src_offset, void* dst,
                  DataType t, ReduceOp op, const void* own) {
  if (hi <= lo) return;
  const std::size_t es = size_of(t);
  auto source = [&](int q) -> const void* {
    if (q == p.rank() && own) return at(own, lo * es);
    const unsigned char* offered = p.node.peer_region(q);  // a node buffer, read in place
    return (offered ? offered : p.slots.slot(q)) + (src_offset + lo) * es;
  };
  reduce_from(dst, p.size(), source, hi - lo, t, op);
}

void reduce_pulled(Parts& p, const void* own, std::size_t lo, std::size_t hi, void* dst,
                   DataType t, ReduceOp op) {
  const std::size_t es = size_of(t);
  const int n = p.size(), me = p.rank();
  const std::size_t piece =
      std::max<std::size_t>(1, CmaPull::kPieceBytes / static_cast<std::size_t>(n) / es);
  unsigned char* scratch = p.cma.scratch(piece * es * static_cast<std::size_t>(n));
  for (std::size_t a = lo; a < hi; a += piece) {
    const std::size_t m = std::min(piece, hi - a);
    auto part = [&](int q) { return scratch + static_cast<std::size_t>(q) * piece * es; };
    for (int q = 0; q < n; ++q) {
      if (q != me) p.cma.pull(q, part(q), p.cma.peer_buffer(q) + a * es, m * es);
    }
    // The reduction may alias only its first source: in place, rank 0 reads its own part where
    // it writes; the others copy theirs aside.
    const bool aside = me != 0 && at(own, a * es) == at(dst, (a - lo) * es);
    if (aside) copy(part(me), at(own, a * es), m * es);
    auto source = [&](int q) -> const void* {
      return q == me && !aside ? at(own, a * es) : part(q);
    };
    reduce_from(at(dst, (a - lo) * es), n, source, m, t, op);
  }
}

}  // namespace synk::shm::algo
