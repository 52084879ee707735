// See settings_agreement.h.
#include "core/settings_agreement.h"

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/mpi/mpi_settings.h"
#include "backends/shm/shm_settings.h"
#include "core/env.h"
#include "core/mpi_check.h"
#include "core/spread.h"
#include "device/device_settings.h"
#include "kv/kv_settings.h"
#include "synk/agreement.h"
#include "synk/error.h"

namespace synk::detail {

namespace {

// Reads every group of settings; the first error, if any, and its text in `text`.
std::exception_ptr read_every_setting(std::string& text) {
  try {
    (void)settings();
    (void)shm_settings();
    (void)mpi_settings();
    (void)kv_settings();
    (void)device_settings();
  } catch (const std::exception& e) {
    text = e.what();
    return std::current_exception();
  }
  return nullptr;
}

// A byte setting whose default depends on the ranks of a node, as the ranks compare it: ""
// where it is unset (nodes of different sizes may take different defaults).
std::string bytes_setting(long long bytes, long long unset) {
  return bytes == unset ? "" : std::to_string(bytes);
}

// The settings that must be the same on every rank, by name, as this rank has them ("": unset).
std::vector<std::pair<const char*, std::string>> shared_settings(const std::string& backend,
                                                                 bool yield_when_waiting) {
  const Settings& s = settings();
  const ShmSettings& shm = shm_settings();
  return {
      {"SYNK_BACKEND (or the Communicator's backend)", backend.empty() ? s.backend : backend},
      {"SYNK_SIMULATE_NODES", std::to_string(s.simulate_nodes)},
      {"SYNK_CHECK_CALLS", s.check_calls ? "1" : "0"},
      // On or off (its start is collective); the file may differ, as each writes FILE.<rank>.
      {"SYNK_TIMELINE (set or not)", s.timeline.empty() ? "unset" : "set"},
      {"SYNK_FUSION_BYTES", std::to_string(kv_settings().fusion_bytes)},
      {"SYNK_PARTITION_BYTES", std::to_string(kv_settings().partition_bytes)},
      {"SYNK_MPI_MAX_CHUNK", std::to_string(mpi_settings().max_chunk_in_effect())},
      {"SYNK_SHM_SLOT_BYTES", std::to_string(shm.slot_bytes_in_effect())},
      {"SYNK_SHM_CMA_BYTES", std::to_string(shm.cma_bytes_in_effect())},
      {"SYNK_SHM_ONE_STEP_BYTES", bytes_setting(shm.one_step_bytes, -1)},
      {"SYNK_SHM_ROOT_REDUCES_BYTES", bytes_setting(shm.root_reduces_bytes, -1)},
      {"SYNK_SHM_ALGO", shm::to_string(shm.forced_algos)},
      {"CommOptions::yield_when_waiting", yield_when_waiting ? "true" : "false"},
  };
}

}  // namespace

void agree_on_settings(MPI_Comm comm, const std::string& backend, bool yield_when_waiting) {
  std::string text;
  const std::exception_ptr error = read_every_setting(text);
  if (const auto failed = first_failure(comm, error != nullptr, text)) {
    if (error) std::rethrow_exception(error);
    throw Error(ErrorCode::Remote, "rank " + std::to_string(failed->rank) +
                                       " cannot read its SYNK_* settings: " + failed->text);
  }
  // Each setting's hash: the same on every rank, or the setting differs somewhere.
  const auto shared = shared_settings(backend, yield_when_waiting);
  std::vector<std::uint64_t> hashes(shared.size());
  for (std::size_t i = 0; i < shared.size(); ++i) {
    hashes[i] = std::hash<std::string>{}(shared[i].second);  // one library on every rank
  }
  Spread spread(hashes);
  SYNK_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, spread.data(), spread.size(), MPI_UINT64_T, MPI_MAX,
                               comm));
  for (std::size_t i = 0; i < shared.size(); ++i) {
    if (spread.same(i)) continue;
    const auto& [name, value] = shared[i];
    const bool option = std::string_view(name).starts_with("CommOptions");
    throw Error(ErrorCode::InvalidUsage,
                std::string(name) + " differs across the ranks (this rank's: " +
                    (value.empty() ? "unset, the default" : "'" + value + "'") +
                    "); it must be the same on every rank: " +
                    (option ? "pass it alike on every rank"
                            : "set it alike everywhere (synkrun passes the SYNK_* variables set "
                              "where it starts; mpirun needs -x)"));
  }
}

}  // namespace synk::detail
