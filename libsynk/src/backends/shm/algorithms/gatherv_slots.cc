// gatherv through the slots. First every rank learns every rank's count (agree_on_counts.cc).
// Then every rank copies a chunk of its block into its slot a step at a time, and the
// root copies every rank's chunk out.
#include <algorithm>
#include <vector>

#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void gatherv_slots(Parts& p, const detail::CollArgs& a) {
  const std::size_t count = a.count;
  const int root = a.root;
  const std::vector<std::size_t> counts = agree_on_counts(p, a);
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
