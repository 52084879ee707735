// gatherv through the slots. The first sync shares every rank's count (in the call
// descriptors); the root checks them against recv_counts and a second sync tells everyone its
// verdict. Then every rank copies a chunk of its block into its slot a step at a time, and the
// root copies every rank's chunk out.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"
#include "synk/error.h"

namespace synk::shm::algo {

namespace {

// Every rank's count; throws on every rank if the root's recv_counts disagree.
std::vector<std::size_t> agree_on_counts(Parts& p, std::span<const std::size_t> recv_counts,
                                         int root) {
  p.steps.next_step();
  p.steps.sync();
  std::vector<std::size_t> counts(static_cast<std::size_t>(p.size()));
  for (int q = 0; q < p.size(); ++q) counts[static_cast<std::size_t>(q)] = p.steps.peer_call_count(q);
  if (p.rank() == root) {
    int bad = -1;
    for (int q = 0; q < p.size() && bad < 0; ++q) {
      if (recv_counts[static_cast<std::size_t>(q)] != counts[static_cast<std::size_t>(q)]) bad = q;
    }
    p.steps.set_status(bad);
  }
  p.steps.sync();
  const int bad = static_cast<int>(p.steps.status_of(root));
  if (bad >= 0) {
    throw Error(ErrorCode::InvalidUsage,
                "gatherv: rank " + std::to_string(bad) + " sends " +
                    std::to_string(counts[static_cast<std::size_t>(bad)]) +
                    " elements but the root's recv_counts[" + std::to_string(bad) +
                    "] says otherwise");
  }
  return counts;
}

}  // namespace

void gatherv_slots(Parts& p, const detail::CollArgs& a) {
  const std::size_t count = a.count;
  const int root = a.root;
  const std::vector<std::size_t> counts = agree_on_counts(p, a.recv_counts, root);
  const std::size_t max_count = *std::max_element(counts.begin(), counts.end());
  const std::size_t es = size_of(a.dtype);
  const std::size_t chunk = p.slots.slot_elems(a.dtype);
  for (std::size_t off = 0; off < max_count; off += chunk) {
    p.slots.next_slot_step(std::min(chunk, max_count - off) * es);
    const std::size_t mine = count > off ? std::min(chunk, count - off) : 0;
    p.slots.copy_in(p.slots.slot(p.rank()), at(a.send, std::min(off, count) * es), mine * es);
    p.steps.sync();
    if (p.rank() != root) continue;
    std::size_t displ = 0;
    for (int q = 0; q < p.size(); ++q) {
      const std::size_t c = counts[static_cast<std::size_t>(q)];
      if (c > off) {
        p.slots.copy_out(at(a.recv, (displ + off) * es), p.slots.slot(q),
                         std::min(chunk, c - off) * es);
      }
      displ += c;
    }
  }
}

}  // namespace synk::shm::algo
