// The first steps of gatherv and scatterv: one sync shares every rank's count (in the call
// descriptors); the root checks them against its counts and a second sync tells everyone its
// verdict, so that a disagreement fails the call on every rank.
#include <cstdint>
#include <string>
#include <vector>

#include "backends/shm/algorithms/algorithms.h"
#include "synk/error.h"

namespace synk::shm::algo {

namespace {

// The root's count for rank `bad`, on every rank: two more syncs, on the failure path only (the
// first so that no rank still reads the verdict from the root's status when it changes).
std::size_t roots_count(Parts& p, const detail::CollArgs& a, std::size_t bad) {
  p.steps.sync();
  if (p.rank() == a.root) p.steps.set_status(static_cast<std::int64_t>(a.counts[bad]));
  p.steps.sync();
  return static_cast<std::size_t>(p.steps.status_of(a.root));
}

}  // namespace

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
                    std::to_string(bad) + "] is " +
                    std::to_string(roots_count(p, a, static_cast<std::size_t>(bad))));
  }
  return counts;
}

}  // namespace synk::shm::algo
