// The tags of synk's point-to-point messages on a communicator's own duplicate, in one place:
// messages between the same two ranks match in order by tag, so two uses of one tag would
// take each other's messages.
#pragma once

#include <iterator>

namespace synk::detail {

inline constexpr int kGathervTag = 0x5e7;   // the mpi backend's gatherv
inline constexpr int kArrivalTag = 0x5e8;   // call_check.cc's notices of arrival
inline constexpr int kScattervTag = 0x5e9;  // the mpi backend's scatterv
inline constexpr int kPacketTag = 0x5ea;    // Distributed's request packets
inline constexpr int kAllToAllvTag = 0x5eb;  // the mpi backend's all_to_allv

inline constexpr int kTags[] = {kGathervTag, kArrivalTag, kScattervTag, kPacketTag,
                                kAllToAllvTag};
constexpr bool tags_differ() {
  for (int i = 0; i < static_cast<int>(std::size(kTags)); ++i) {
    for (int j = 0; j < i; ++j) {
      if (kTags[i] == kTags[j]) return false;
    }
  }
  return true;
}
static_assert(tags_differ(), "every use of a tag is its own");

}  // namespace synk::detail
