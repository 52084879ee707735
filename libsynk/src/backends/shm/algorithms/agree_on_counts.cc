// The first steps of gatherv and scatterv: one sync shares every rank's count (in the call
// descriptors); the root checks them against its counts and a second sync tells everyone its
// verdict, so that a disagreement fails the call on every rank.
#include <string>
#include <vector>

#include "backends/shm/algorithms/algorithms.h"
#include "synk/error.h"

namespace synk::shm::algo {

std::vector<std::size_t> agree_on_counts(Parts& p, const detail::CollArgs& a) {
  p.steps.next_step();
  p.steps.sync();
  std::vector<std::size_t> counts(static_cast<std::size_t>(p.size()));
  for (int q = 0; q < p.size(); ++q) counts[static_cast<std::size_t>(q)] = p.steps.peer_call_count(q);
  if (p.rank() == a.root) {
    int bad = -1;
    for (int q = 0; q < p.size() && bad < 0; ++q) {
      if (a.counts[static_cast<std::size_t>(q)] != counts[static_cast<std::size_t>(q)]) bad = q;
    }
    p.steps.set_status(bad);
  }
  p.steps.sync();
  const int bad = static_cast<int>(p.steps.status_of(a.root));
  if (bad >= 0) {
    const bool gatherv = a.coll == detail::Collective::gatherv;
    throw Error(ErrorCode::InvalidUsage,
                std::string(gatherv ? "gatherv: rank " : "scatterv: rank ") + std::to_string(bad) +
                    (gatherv ? " sends " : " receives ") +
                    std::to_string(counts[static_cast<std::size_t>(bad)]) +
                    " elements but the root's " + (gatherv ? "recv_counts[" : "send_counts[") +
                    std::to_string(bad) + "] says otherwise");
  }
  return counts;
}

}  // namespace synk::shm::algo
