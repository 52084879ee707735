// all_to_all through the slots: in each step every rank copies a chunk of each peer's block into
// its own slot, a part per peer in rank order, posts, and then copies its part out of every
// peer's slot. Its own block goes straight from send to recv in the first step, while the peers
// copy in. A step moves at most slot_bytes / size bytes per pair.
#include <string>

#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"
#include "synk/error.h"

namespace synk::shm::algo {

void all_to_all_slots(Parts& p, const detail::CollArgs& a) {
  const int me = p.rank();
  const auto ranks = static_cast<std::size_t>(p.size());
  const std::size_t es = size_of(a.dtype);
  const std::size_t part = p.slots.slot_elems(a.dtype) / ranks;  // elements per pair per step
  if (part == 0) {  // the same on every rank: all throw before the first step
    throw Error(ErrorCode::InvalidUsage,
                "all_to_all: a shm slot of " + std::to_string(p.slots.slot_bytes()) +
                    " bytes holds less than one element per rank for " + std::to_string(ranks) +
                    " ranks; raise SYNK_SHM_SLOT_BYTES");
  }
  const std::size_t block = a.count * es;  // bytes per pair
  const auto pos = [&](std::size_t q, std::size_t off) { return q * block + off * es; };
  const auto own = static_cast<std::size_t>(me);
  bool own_copied = false;
  each_chunk(a.count, part, [&](std::size_t off, std::size_t n) {
    p.slots.next_slot_step(ranks * n * es);
    unsigned char* mine = p.slots.slot(me);
    for (std::size_t q = 0; q < ranks; ++q) {
      if (q != own) p.slots.copy_in(mine + q * n * es, at(a.send, pos(q, off)), n * es);
    }
    p.steps.post();
    if (!own_copied) {
      p.slots.copy_out(at(a.recv, pos(own, 0)), at(a.send, pos(own, 0)), block);
      own_copied = true;
    }
    p.steps.arrive();
    for (std::size_t q = 0; q < ranks; ++q) {
      if (q == own) continue;
      p.slots.copy_out(at(a.recv, pos(q, off)), p.slots.slot(static_cast<int>(q)) + own * n * es,
                       n * es);
    }
  });
}

}  // namespace synk::shm::algo
