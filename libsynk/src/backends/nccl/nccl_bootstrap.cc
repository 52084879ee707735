// bootstrap_nccl (see nccl_comm.h): every rank picks its device, the ranks compare their picks
// over MPI (so a rank's failure reaches all of them instead of hanging the others in NCCL's
// init), rank 0's ncclUniqueId travels by MPI_Bcast, and the communicator is created without
// blocking so that its init has a deadline.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "backends/nccl/device_choice.h"
#include "backends/nccl/nccl_comm.h"
#include "core/backoff.h"
#include "core/contexts.h"
#include "core/env.h"
#include "core/logging.h"
#include "core/mpi_check.h"
#include "core/mpi_runtime.h"
#include "device/device_settings.h"

namespace synk::detail {

namespace {

constexpr int kOk = -1;

// What each rank tells the others after choosing its device (sent as bytes).
struct DeviceRecord {
  std::int32_t code = kOk;  // kOk, or the ErrorCode of the rank's failure
  std::int32_t device = -1;
  char bus_id[32] = {};
  char host[64] = {};
  char message[320] = {};
};

struct IdMessage {
  std::int32_t code = kOk;
  char message[320] = {};
  ncclUniqueId id;
};

template <std::size_t N>
void copy_text(char (&dst)[N], const std::string& src) {
  const std::size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

int visible_device_count() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    throw Error(ErrorCode::NotSupported,
                std::string("the nccl backend: no CUDA device is visible (cudaGetDeviceCount: ") +
                    cudaGetErrorString(rc) + ")");
  }
  if (count <= 0) {
    throw Error(ErrorCode::NotSupported,
                "the nccl backend: no CUDA device is visible (cudaGetDeviceCount: found 0 "
                "devices)");
  }
  return count;
}

std::mutex chosen_mu;
std::optional<int> chosen_device;

// The device of this process: chosen by the first NCCL communicator and kept for every later
// one (a split included), since the user's device buffers live on it.
int choose_device(int local_rank, int count) {
  const std::lock_guard<std::mutex> lock(chosen_mu);
  if (chosen_device) return *chosen_device;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const int device = pick_device(device_settings().gpu, visible, local_rank, count);
  SYNK_CHECK_CUDA(cudaSetDevice(device));
  chosen_device = device;
  return device;
}

// The device's name, as cudaGetDeviceProperties reports it.
std::string device_name(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "(name unknown)";
  prop.name[sizeof prop.name - 1] = '\0';
  return prop.name;
}

// SYNK_LOG=info: a line per name of SYNK_CONTEXTS, as Theano prints them.
void log_context_map(int visible_devices) {
  if (!log_enabled(LogLevel::info)) return;
  const ContextMap map = parse_contexts(device_settings().contexts);
  for (const std::string& line : context_mapping_lines(map, visible_devices, device_name)) {
    SYNK_LOG_AT(info, line);
  }
}

// This rank's record: its device, or the error that kept it from having one.
DeviceRecord local_record(int local_rank) {
  DeviceRecord rec;
  const std::string host = host_name();
  copy_text(rec.host, host);
  try {
    const int count = visible_device_count();
    rec.device = choose_device(local_rank, count);
    log_context_map(count);
    SYNK_CHECK_CUDA(cudaDeviceGetPCIBusId(rec.bus_id, sizeof rec.bus_id, rec.device));
  } catch (const Error& e) {
    rec.code = static_cast<std::int32_t>(e.code());
    copy_text(rec.message, e.message());
  }
  return rec;
}

// The rank's index among the ranks of this communicator on its host.
int host_local_rank(const CommContext& ctx) {
  const std::uint64_t mine = std::hash<std::string>{}(host_name());
  std::vector<std::uint64_t> all(static_cast<std::size_t>(ctx.size));
  SYNK_CHECK_MPI(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, ctx.comm));
  int local = 0;
  for (int r = 0; r < ctx.rank; ++r) local += all[static_cast<std::size_t>(r)] == mine ? 1 : 0;
  return local;
}

void check_devices(const CommContext& ctx, const DeviceRecord& mine,
                   const std::vector<DeviceRecord>& all) {
  if (mine.code != kOk) throw Error(static_cast<ErrorCode>(mine.code), mine.message);
  for (int r = 0; r < ctx.size; ++r) {
    const DeviceRecord& other = all[static_cast<std::size_t>(r)];
    if (other.code != kOk) {
      throw Error(ErrorCode::Remote, "the nccl backend: rank " + std::to_string(r) +
                                         " could not set up its CUDA device: " + other.message);
    }
  }
  std::vector<RankDevice> devices;
  for (const DeviceRecord& r : all) devices.push_back(RankDevice{r.host, r.bus_id});
  if (const auto pair = find_shared_device(devices)) {
    const DeviceRecord& x = all[static_cast<std::size_t>(pair->first)];
    throw Error(ErrorCode::InvalidUsage,
                "the nccl backend: ranks " + std::to_string(pair->first) + " and " +
                    std::to_string(pair->second) + " both use the CUDA device at PCI " + x.bus_id +
                    " on host " + x.host +
                    "; NCCL needs one device per rank (start the ranks with synkrun, or give "
                    "each its own device with SYNK_GPU or CUDA_VISIBLE_DEVICES)");
  }
}

ncclUniqueId shared_unique_id(const CommContext& ctx) {
  IdMessage msg;
  if (ctx.rank == 0) {
    try {
      SYNK_CHECK_NCCL(ncclGetUniqueId(&msg.id));
    } catch (const Error& e) {
      msg.code = static_cast<std::int32_t>(e.code());
      copy_text(msg.message, e.message());
    }
  }
  SYNK_CHECK_MPI(MPI_Bcast(&msg, static_cast<int>(sizeof msg), MPI_BYTE, 0, ctx.comm));
  if (msg.code != kOk) {
    throw Error(
        ctx.rank == 0 ? ErrorCode::Backend : ErrorCode::Remote,
        std::string("the nccl backend: ") + (ctx.rank == 0 ? "" : "rank 0: ") + msg.message);
  }
  return msg.id;
}

ncclComm_t init_comm(const CommContext& ctx, const ncclUniqueId& id, int device) {
  const double timeout_s = settings().timeout_s;
  const auto end = NcclComm::Clock::now() + wait_duration(timeout_s);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init returns at once; the loop below gives it a deadline
  ncclComm_t comm = nullptr;
  ncclResult_t rc = ncclCommInitRankConfig(&comm, ctx.size, id, ctx.rank, &config);
  int spins = 0;
  while (rc == ncclInProgress || (rc == ncclSuccess && comm)) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm, &state);
    rc = q != ncclSuccess ? q : state;
    if (rc != ncclInProgress) break;
    if (NcclComm::Clock::now() > end) {
      ncclCommAbort(comm);
      note_peer_lost();
      throw Error(ErrorCode::Timeout,
                  "the nccl backend: rank " + std::to_string(ctx.rank) + " of " +
                      std::to_string(ctx.size) + ": ncclCommInitRankConfig on device " +
                      std::to_string(device) + " did not complete within " +
                      seconds_text(timeout_s) + " (SYNK_TIMEOUT); the communicator was aborted");
    }
    if (++spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (rc != ncclSuccess) {
    const std::string msg = nccl_message(rc);
    if (comm) ncclCommAbort(comm);
    throw Error(ErrorCode::Backend, "the nccl backend: rank " + std::to_string(ctx.rank) +
                                        ": ncclCommInitRankConfig (rank " +
                                        std::to_string(ctx.rank) + " of " +
                                        std::to_string(ctx.size) + ") failed: " + msg);
  }
  return comm;
}

}  // namespace

std::optional<int> nccl_process_device() {
  const std::lock_guard<std::mutex> lock(chosen_mu);
  return chosen_device;
}

int choose_process_device(int local_rank) {
  const int launcher = settings().launcher_local_rank;
  return choose_device(launcher >= 0 ? launcher : local_rank, visible_device_count());
}

std::shared_ptr<NcclComm> bootstrap_nccl(const CommContext& ctx) {
  const Settings& s = settings();
  // Collective on every rank, whether or not the launcher's local rank is known.
  const int on_host = host_local_rank(ctx);
  const int local_rank = s.launcher_local_rank >= 0 ? s.launcher_local_rank : on_host;
  const DeviceRecord mine = local_record(local_rank);
  std::vector<DeviceRecord> all(static_cast<std::size_t>(ctx.size));
  SYNK_CHECK_MPI(MPI_Allgather(&mine, static_cast<int>(sizeof mine), MPI_BYTE, all.data(),
                               static_cast<int>(sizeof mine), MPI_BYTE, ctx.comm));
  check_devices(ctx, mine, all);

  const ncclUniqueId id = shared_unique_id(ctx);
  DeviceGuard guard(mine.device);
  const ncclComm_t comm = init_comm(ctx, id, mine.device);
  int version = 0;
  SYNK_CHECK_NCCL(ncclGetVersion(&version));
  SYNK_LOG_AT(info, "backend nccl: rank " << ctx.rank << " of " << ctx.size << " on CUDA device "
                                          << mine.device << " (PCI " << mine.bus_id << "), NCCL "
                                          << version);
  return std::make_shared<NcclComm>(comm, mine.device, ctx.rank, ctx.size, s.timeout_s);
}

}  // namespace synk::detail
