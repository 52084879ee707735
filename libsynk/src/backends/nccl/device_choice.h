// The NCCL backend's device rules as pure functions (no CUDA), so they are tested on machines
// without a GPU: which visible device a rank takes, and which ranks would share one.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace synk::detail {

// The device index (among the visible ones) of a rank. synk_gpu is SYNK_GPU ("2" or "2,3";
// the first entry counts), visible_restricted says CUDA_VISIBLE_DEVICES is set (synkrun sets it
// to the rank's GPUs, so the first of them is device 0), local_rank is the rank on its node and
// count the number of visible devices (> 0). Throws InvalidArgument for a malformed SYNK_GPU or
// a device that is not visible.
int pick_device(const std::string& synk_gpu, bool visible_restricted, int local_rank, int count);

struct RankDevice {
  std::string host;    // host name
  std::string bus_id;  // PCI bus id of the device (cudaDeviceGetPCIBusId)
};

// The first two ranks (a < b) that use the same device of the same host, if any.
std::optional<std::pair<int, int>> find_shared_device(const std::vector<RankDevice>& ranks);

}  // namespace synk::detail
