// The NCCL backend's device rules as pure functions (no CUDA), so they are tested on machines
// without a GPU: which visible device a rank takes, and which ranks would share one.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace synk::detail {

// The device index (among the visible ones) of a rank. synk_gpu is SYNK_GPU ("2" or "2,3";
// the first entry counts); visible is CUDA_VISIBLE_DEVICES (null or empty: not set), in which
// SYNK_GPU's GPU is found: synkrun sets it to the rank's GPUs, so the first of them is device
// 0, and a batch system's "0,1,2,3" makes SYNK_GPU=2 device 2 (it was device 0 on every rank);
// a GPU the list does not name is its device 0, as before. local_rank is the rank on its node
// and count the number of visible devices (> 0). Throws InvalidArgument for a malformed
// SYNK_GPU or a device that is not visible.
int pick_device(const std::string& synk_gpu, const char* visible, int local_rank, int count);

struct RankDevice {
  std::string host;    // host name
  std::string bus_id;  // PCI bus id of the device (cudaDeviceGetPCIBusId)
};

// The first two ranks (a < b) that use the same device of the same host, if any.
std::optional<std::pair<int, int>> find_shared_device(const std::vector<RankDevice>& ranks);

}  // namespace synk::detail
