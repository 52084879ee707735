// The tags of synk's point-to-point messages on a communicator's own duplicate, in one place:
// messages between the same two ranks match in order by tag, so two uses of one tag would
// take each other's messages.
#pragma once

namespace synk::detail {

inline constexpr int kGathervTag = 0x5e7;   // the mpi backend's gatherv
inline constexpr int kArrivalTag = 0x5e8;   // call_check.cc's notices of arrival
inline constexpr int kScattervTag = 0x5e9;  // the mpi backend's scatterv
inline constexpr int kPacketTag = 0x5ea;    // Distributed's request packets

static_assert(kGathervTag != kArrivalTag && kGathervTag != kScattervTag &&
                  kGathervTag != kPacketTag && kArrivalTag != kScattervTag &&
                  kArrivalTag != kPacketTag && kScattervTag != kPacketTag,
              "every use of a tag is its own");

}  // namespace synk::detail
