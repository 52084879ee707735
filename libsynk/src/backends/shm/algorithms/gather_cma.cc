// all_gather (root -1) and gather by cross-memory attach: every rank that receives pulls each
// peer's block straight out of that peer's send buffer with process_vm_readv, one copy instead
// of the slots' two, and copies its own block from send. Each receiver starts with the rank
// after its own, so that the ranks do not all read rank 0 first. A rank whose block is read
// waits for its readers (its buffer must stay as it is until then). Chosen by measurement
// (algo_chooser.h): it wins where the ranks share a large last-level cache.
#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"

namespace synk::shm::algo {

void gather_cma(Parts& p, const detail::CollArgs& a) {
  const std::size_t bytes = a.count * size_of(a.dtype);
  p.cma.open(a.send);
  const int me = p.rank(), n = p.size(), root = receiver(a);
  if (root < 0 || root == me) {
    for (int k = 1; k < n; ++k) {
      const int q = (me + k) % n;
      p.cma.pull(q, at(a.recv, static_cast<std::size_t>(q) * bytes), p.cma.peer_buffer(q), bytes);
    }
    copy(at(a.recv, static_cast<std::size_t>(me) * bytes), a.send, bytes);  // nothing in place
  }
  p.cma.finish();
}

}  // namespace synk::shm::algo
