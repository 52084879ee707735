// all_to_allv through the slots. A first step agrees on the counts: every rank writes its
// send_counts into its slot, then reads what each peer sends it (checked against its
// recv_counts) and the largest count of any pair, which sets the number of data steps; a second
// sync shares each rank's verdict, so that counts that disagree fail the call on every rank.
// Then all_to_all_slots' steps, each pair moving its own count, at most slot_bytes / size
// bytes a step.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/shm/algorithms/algorithms.h"
#include "backends/shm/byte_offset.h"
#include "synk/error.h"

namespace synk::shm::algo {

namespace {

// What `peer` sends `to`, from the counts step's slots.
std::uint64_t sends(Parts& p, int peer, std::size_t to) {
  std::uint64_t c = 0;
  std::memcpy(&c, p.slots.slot(peer) + to * sizeof c, sizeof c);
  return c;
}

// The counts step: returns the largest count of any pair; throws InvalidUsage on every rank
// where a rank's recv_counts disagree with what its peers send it (the first such rank's first
// peer, so that every rank says the same).
std::size_t agree_on_pairs(Parts& p, const detail::CollArgs& a) {
  const auto ranks = static_cast<std::size_t>(p.size());
  const auto me = static_cast<std::size_t>(p.rank());
  p.slots.next_slot_step(ranks * sizeof(std::uint64_t), false);
  for (std::size_t q = 0; q < ranks; ++q) {
    const std::uint64_t c = a.counts[q];
    std::memcpy(p.slots.slot(p.rank()) + q * sizeof c, &c, sizeof c);
  }
  p.steps.sync();
  std::int64_t bad = -1;
  std::size_t largest = 0;
  for (int q = 0; q < p.size(); ++q) {
    if (bad < 0 && sends(p, q, me) != a.recv_counts[static_cast<std::size_t>(q)]) bad = q;
    for (std::size_t r = 0; r < ranks; ++r) {
      largest = std::max<std::size_t>(largest, sends(p, q, r));
    }
  }
  p.steps.set_status(bad);
  p.steps.sync();
  for (int receiver = 0; receiver < p.size(); ++receiver) {
    const std::int64_t sender = p.steps.status_of(receiver);
    if (sender < 0) continue;
    const auto from = static_cast<std::size_t>(sender);
    const std::uint64_t sent =
        sends(p, static_cast<int>(sender), static_cast<std::size_t>(receiver));
    // The receiver's recv_counts[sender] is its own: two more syncs share it.
    p.steps.sync();
    if (p.rank() == receiver) p.steps.set_status(static_cast<std::int64_t>(a.recv_counts[from]));
    p.steps.sync();
    throw Error(ErrorCode::InvalidUsage,
                "all_to_allv: rank " + std::to_string(sender) + " sends " + std::to_string(sent) +
                    " elements to rank " + std::to_string(receiver) + " but rank " +
                    std::to_string(receiver) + "'s recv_counts[" + std::to_string(sender) +
                    "] is " + std::to_string(p.steps.status_of(receiver)));
  }
  return largest;
}

// Where each rank's block starts: the counts before it, one after another.
std::vector<std::size_t> displacements(std::span<const std::size_t> counts) {
  std::vector<std::size_t> d(counts.size());
  std::size_t at_elem = 0;
  for (std::size_t q = 0; q < counts.size(); ++q) {
    d[q] = at_elem;
    at_elem += counts[q];
  }
  return d;
}

}  // namespace

void all_to_allv_slots(Parts& p, const detail::CollArgs& a) {
  const auto ranks = static_cast<std::size_t>(p.size());
  const auto own = static_cast<std::size_t>(p.rank());
  const std::size_t es = size_of(a.dtype);
  const std::size_t part = p.slots.slot_elems(a.dtype) / ranks;  // elements per pair per step
  if (part == 0 || ranks * sizeof(std::uint64_t) > p.slots.slot_bytes()) {  // alike everywhere
    throw Error(ErrorCode::InvalidUsage,
                "all_to_allv: a shm slot of " + std::to_string(p.slots.slot_bytes()) +
                    " bytes is too small for " + std::to_string(ranks) +
                    " ranks; raise SYNK_SHM_SLOT_BYTES");
  }
  const std::size_t largest = agree_on_pairs(p, a);
  const std::vector<std::size_t> send_displ = displacements(a.counts);
  const std::vector<std::size_t> recv_displ = displacements(a.recv_counts);
  bool own_copied = false;
  each_chunk(largest, part, [&](std::size_t off, std::size_t n) {
    p.slots.next_slot_step(ranks * n * es);
    unsigned char* mine = p.slots.slot(p.rank());
    for (std::size_t q = 0; q < ranks; ++q) {
      if (q == own || a.counts[q] <= off) continue;
      p.slots.copy_in(mine + q * n * es, at(a.send, (send_displ[q] + off) * es),
                      std::min(n, a.counts[q] - off) * es);
    }
    p.steps.post();
    if (!own_copied) {
      copy(at(a.recv, recv_displ[own] * es), at(a.send, send_displ[own] * es),
           a.counts[own] * es);
      own_copied = true;
    }
    p.steps.arrive();
    for (std::size_t q = 0; q < ranks; ++q) {
      if (q == own || a.recv_counts[q] <= off) continue;
      p.slots.copy_out(at(a.recv, (recv_displ[q] + off) * es),
                       p.slots.slot(static_cast<int>(q)) + own * n * es,
                       std::min(n, a.recv_counts[q] - off) * es);
    }
  });
}

}  // namespace synk::shm::algo
