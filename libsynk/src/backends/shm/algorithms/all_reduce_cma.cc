// all_reduce by cross-memory attach, in two phases with one copy each: every rank pulls its slice
// of every peer's send buffer with process_vm_readv, a piece at a time, and reduces it (in rank
// order, as reduce_slices does) straight into its own recv; then, after a sync, every rank pulls
// the other ranks' reduced slices out of their recv. Through the slots each byte is copied in,
// reduced out and copied out again. Chosen by measurement (algo_chooser.h): it can win where the
// ranks share a large last-level cache.
#include "backends/shm/algorithms/reduction.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void all_reduce_cma(Parts& p, const detail::CollArgs& a) {
  const std::size_t count = a.count, es = size_of(a.dtype);
  void* recv = a.recv;
  std::size_t lo, hi;
  slice(p.rank(), p.size(), count, es, &lo, &hi);
  p.cma.open(a.send, recv);
  reduce_pulled(p, a.send, lo, hi, at(recv, lo * es), a.dtype, a.op);
  p.steps.sync();  // every rank's slice is reduced: the others' may be read now
  for (int q = 0; q < p.size(); ++q) {
    if (q == p.rank()) continue;
    std::size_t qlo, qhi;
    slice(q, p.size(), count, es, &qlo, &qhi);
    p.cma.pull(q, at(recv, qlo * es), p.cma.peer_buffer(q, 1) + qlo * es, (qhi - qlo) * es);
  }
  p.cma.finish();
}

}  // namespace synk::shm::algo
