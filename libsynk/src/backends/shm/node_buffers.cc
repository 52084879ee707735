// Node buffers: offering this rank's part to be read in place, and finding a peer's offer.
#include "backends/shm/node_buffers.h"

#include <cstdint>
#include <iterator>
#include <string>
#include <utility>

#include "synk/error.h"

namespace synk::shm {

int NodeBuffers::add_region(unsigned char* base, std::size_t stride, std::size_t bytes,
                            std::shared_ptr<void> keep) {
  const std::size_t index = next_index_++;
  regions_.emplace(index, Region{base, stride, bytes, std::move(keep)});
  return static_cast<int>(index);
}

std::vector<std::uint8_t> NodeBuffers::dropped_here() const {
  std::vector<std::uint8_t> dropped;
  for (const auto& [index, r] : regions_) {
    // The NodeBuffers of a region hold its segment too: one holder left is the group alone.
    dropped.push_back(r.keep.use_count() > 1 ? 0 : 1);
  }
  return dropped;
}

void NodeBuffers::release(const std::vector<std::uint8_t>& dropped_everywhere) {
  std::size_t j = 0;
  for (auto it = regions_.begin(); it != regions_.end(); ++j) {
    const bool drop = j < dropped_everywhere.size() && dropped_everywhere[j] != 0;
    it = drop ? regions_.erase(it) : std::next(it);
  }
}

bool NodeBuffers::offer(const void* src, std::size_t bytes) {
  if (slots_.streams_in()) return false;  // node_buffers.h says why
  const auto p = reinterpret_cast<std::uintptr_t>(src);
  for (const auto& [i, r] : regions_) {
    const auto mine = reinterpret_cast<std::uintptr_t>(r.base) +
                      static_cast<std::uintptr_t>(steps_.rank()) * r.stride;
    if (bytes > 0 && p >= mine && p - mine <= r.bytes && bytes <= r.bytes - (p - mine)) {
      steps_.set_step_word(StepChannel::kOfferRegion, i + 1);
      steps_.set_step_word(StepChannel::kOfferOffset, p - mine);
      return true;
    }
  }
  return false;
}

const unsigned char* NodeBuffers::peer_region(int peer) const {
  if (regions_.empty()) return nullptr;  // regions are made by all ranks: nobody offers
  const std::uint64_t id = steps_.peer_step_word(peer, StepChannel::kOfferRegion);
  const std::uint64_t offset = steps_.peer_step_word(peer, StepChannel::kOfferOffset);
  if (id == 0) return nullptr;
  const auto found = regions_.find(static_cast<std::size_t>(id - 1));
  if (found == regions_.end() || offset > found->second.bytes) {
    throw Error(ErrorCode::Backend, std::string(steps_.op_name()) + ": rank " +
                                        steps_.rank_text(peer) +
                                        " offered node buffer " + std::to_string(id - 1) + " at " +
                                        std::to_string(offset) + ", which this rank (" +
                                        steps_.rank_text(steps_.rank()) +
                                        ") does not have");
  }
  const Region& r = found->second;
  return r.base + static_cast<std::size_t>(peer) * r.stride + offset;
}

}  // namespace synk::shm
