// See device_choice.h.
#include "backends/nccl/device_choice.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>

#include "synk/error.h"

namespace synk::detail {

namespace {

int first_gpu(const std::string& gpu) {
  const std::string first = gpu.substr(0, gpu.find(','));
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(first.c_str(), &end, 10);
  if (first.empty() || first[0] == '-' || first[0] == '+' || errno != 0 || *end != '\0' ||
      v > INT_MAX) {
    throw Error(ErrorCode::InvalidArgument,
                "SYNK_GPU='" + gpu +
                    "' is not valid: expected a GPU index or a comma-separated list of them");
  }
  return static_cast<int>(v);
}

// GPU `gpu`'s position in a CUDA_VISIBLE_DEVICES list of indexes, or 0 where the list does not
// name it (UUIDs, or another set).
int position_in(const std::string& visible, int gpu) {
  const std::string want = std::to_string(gpu);
  int position = 0;
  std::size_t from = 0;
  while (true) {
    const std::size_t comma = visible.find(',', from);
    std::string item = visible.substr(from, comma == std::string::npos ? comma : comma - from);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item == want) return position;
    if (comma == std::string::npos) return 0;
    from = comma + 1;
    ++position;
  }
}

}  // namespace

int pick_device(const std::string& synk_gpu, const char* visible, int local_rank, int count) {
  if (synk_gpu.empty()) return local_rank % count;
  const int gpu = first_gpu(synk_gpu);
  const int device = visible != nullptr && *visible != '\0' ? position_in(visible, gpu) : gpu;
  if (device >= count) {
    throw Error(ErrorCode::InvalidArgument, "SYNK_GPU='" + synk_gpu + "' selects CUDA device " +
                                                std::to_string(device) + " but this rank sees " +
                                                std::to_string(count) + " device(s)");
  }
  return device;
}

std::optional<std::pair<int, int>> find_shared_device(const std::vector<RankDevice>& ranks) {
  const int n = static_cast<int>(ranks.size());
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const RankDevice& x = ranks[static_cast<std::size_t>(a)];
      const RankDevice& y = ranks[static_cast<std::size_t>(b)];
      if (x.host == y.host && x.bus_id == y.bus_id) return std::make_pair(a, b);
    }
  }
  return std::nullopt;
}

}  // namespace synk::detail
