// scatterv through the slots, gatherv's mirror: first every rank learns every rank's count
// (agree_on_counts.cc). Then step by step the root copies a chunk of every other rank's block
// into that rank's slot, and after a sync each rank copies its chunk out. The root's own block
// goes straight to recv (nothing moves in place, where they are one).
#include <algorithm>
#include <vector>

#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void scatterv_slots(Parts& p, const detail::CollArgs& a) {
  const std::vector<std::size_t> counts = agree_on_counts(p, a);
  const std::size_t max_count = *std::max_element(counts.begin(), counts.end());
  const std::size_t es = size_of(a.dtype);
  const std::size_t chunk = p.slots.slot_elems(a.dtype);
  const bool root = p.rank() == a.root;
  std::size_t own_displ = 0;
  for (int q = 0; q < a.root; ++q) own_displ += counts[static_cast<std::size_t>(q)];
  for (std::size_t off = 0; off < max_count; off += chunk) {
    p.slots.next_slot_step(std::min(chunk, max_count - off) * es);
    std::size_t displ = 0;
    for (int q = 0; root && q < p.size(); ++q) {
      const std::size_t c = counts[static_cast<std::size_t>(q)];
      if (q != a.root && c > off) {
        p.slots.copy_in(p.slots.slot(q), at(a.send, (displ + off) * es),
                        std::min(chunk, c - off) * es);
      }
      displ += c;
    }
    p.steps.sync();
    if (a.count <= off) continue;
    const void* src = root ? at(a.send, (own_displ + off) * es) : p.slots.slot(p.rank());
    void* dst = at(a.recv, off * es);
    if (src != dst) p.slots.copy_out(dst, src, std::min(chunk, a.count - off) * es);
  }
}

}  // namespace synk::shm::algo
