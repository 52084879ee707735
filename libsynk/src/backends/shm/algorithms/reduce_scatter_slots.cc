// reduce_scatter through the slots: each step carries chunk j of all size() blocks from every
// rank; rank r reduces block r of every slot straight into its recv, its own block r from send
// (not copied in: nobody else reads it) unless recv is that very block (in place), which the
// reduction may not alias.
#include <algorithm>

#include "backends/shm/algorithms/reduction.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void reduce_scatter_slots(Parts& p, const detail::CollArgs& a) {
  const void* send = a.send;
  void* recv = a.recv;
  const std::size_t count = a.count;
  const DataType t = a.dtype;
  const std::size_t es = size_of(t);
  const std::size_t n_ranks = static_cast<std::size_t>(p.size());
  const std::size_t me = static_cast<std::size_t>(p.rank());
  const std::size_t chunk = std::max<std::size_t>(1, p.slots.slot_elems(t) / n_ranks);
  each_chunk(count, chunk, [&](std::size_t off, std::size_t n) {
    p.slots.next_slot_step(n_ranks * n * es);
    unsigned char* mine = p.slots.slot(p.rank());
    const unsigned char* own = at(send, (me * count + off) * es);
    const bool own_from_send = own != at(recv, off * es);
    for (std::size_t b = 0; b < n_ranks; ++b) {
      if (b != me || !own_from_send)
        p.slots.copy_in(mine + b * n * es, at(send, (b * count + off) * es), n * es);
    }
    p.steps.sync();
    reduce_slice(p, 0, n, me * n, at(recv, off * es), t, a.op, own_from_send ? own : nullptr);
  });
}

}  // namespace synk::shm::algo
