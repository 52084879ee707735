// Parsing of the SYNK_* environment variables: defaults, valid values, and clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "backends/mpi/mpi_settings.h"
#include "backends/shm/shm_settings.h"
#include "core/backend.h"
#include "core/env.h"
#include "device/device_settings.h"
#include "kv/kv_settings.h"
#include "synk/error.h"

namespace synk::detail {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Every subsystem's settings, each parsed where it is declared, from one map.
struct AllSettings : Settings {
  MpiSettings mpi;
  ShmSettings shm;
  DeviceSettings device;
  KvSettings kv;
};

AllSettings parse(const std::map<std::string, std::string>& vars) {
  const EnvGetter get = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  AllSettings all;
  static_cast<Settings&>(all) = Settings::parse(get);
  all.mpi = MpiSettings::parse(get);
  all.shm = ShmSettings::parse(get);
  all.device = DeviceSettings::parse(get);
  all.kv = KvSettings::parse(get);
  return all;
}

void expect_rejected(const std::string& var, const std::string& value) {
  try {
    parse({{var, value}});
    ADD_FAILURE() << var << "=" << value << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr(var));
    EXPECT_THAT(e.what(), HasSubstr("'" + value + "'"));
  }
}

TEST(Env, Defaults) {
  const AllSettings s = parse({});
  EXPECT_EQ(s.backend, "auto");
  EXPECT_EQ(s.log_level, LogLevel::warn);
  EXPECT_DOUBLE_EQ(s.timeout_s, 300.0);
  EXPECT_EQ(s.simulate_nodes, 1);
  EXPECT_FALSE(s.check_calls);
  EXPECT_EQ(s.mpi.max_chunk, 0u);
  EXPECT_EQ(s.shm.store_mode, shm::StoreMode::tuned);
  EXPECT_EQ(s.shm.spin_us, -1);
  EXPECT_EQ(s.kv.fusion_bytes, std::size_t{64} << 20);
  EXPECT_DOUBLE_EQ(s.stall_warn_s, 60.0);
  EXPECT_EQ(s.kv.cycle_ms, 0);
  EXPECT_EQ(s.kv.partition_bytes, std::size_t{4} << 20);
  EXPECT_EQ(s.timeline, "");
}

TEST(Env, KeyValueSettings) {
  EXPECT_EQ(parse({{"SYNK_FUSION_BYTES", "0"}}).kv.fusion_bytes, 0u);
  EXPECT_EQ(parse({{"SYNK_FUSION_BYTES", " 4096 "}}).kv.fusion_bytes, 4096u);
  EXPECT_DOUBLE_EQ(parse({{"SYNK_STALL_WARN", "0.5"}}).stall_warn_s, 0.5);
  EXPECT_EQ(parse({{"SYNK_CYCLE_MS", "5"}}).kv.cycle_ms, 5);
  EXPECT_EQ(parse({{"SYNK_PARTITION_BYTES", "0"}}).kv.partition_bytes, 0u);
  EXPECT_EQ(parse({{"SYNK_PARTITION_BYTES", "65536"}}).kv.partition_bytes, 65536u);
  EXPECT_EQ(parse({{"SYNK_TIMELINE", " /tmp/t.json"}}).timeline, "/tmp/t.json");
  expect_rejected("SYNK_FUSION_BYTES", "-1");
  expect_rejected("SYNK_FUSION_BYTES", "64M");
  expect_rejected("SYNK_STALL_WARN", "0");
  expect_rejected("SYNK_CYCLE_MS", "10001");
  expect_rejected("SYNK_PARTITION_BYTES", "4M");
}

TEST(Env, EmptyMeansDefault) {
  EXPECT_EQ(parse({{"SYNK_BACKEND", ""}, {"SYNK_TIMEOUT", ""}}).backend, "auto");
}

TEST(Env, ValidValues) {
  const AllSettings s = parse({{"SYNK_BACKEND", "mpi"},
                            {"SYNK_LOG", "debug"},
                            {"SYNK_TIMEOUT", "2.5"},
                            {"SYNK_SIMULATE_NODES", "3"},
                            {"SYNK_CHECK_CALLS", "1"},
                            {"SYNK_MPI_MAX_CHUNK", "1000"}});
  EXPECT_EQ(s.backend, "mpi");
  EXPECT_EQ(s.log_level, LogLevel::debug);
  EXPECT_DOUBLE_EQ(s.timeout_s, 2.5);
  EXPECT_EQ(s.simulate_nodes, 3);
  EXPECT_TRUE(s.check_calls);
  EXPECT_EQ(s.mpi.max_chunk, 1000u);
  for (const char* b : {"auto", "shm", "nccl"}) EXPECT_EQ(parse({{"SYNK_BACKEND", b}}).backend, b);
  EXPECT_EQ(parse({{"SYNK_LOG", "error"}}).log_level, LogLevel::error);
  EXPECT_EQ(parse({{"SYNK_LOG", "info"}}).log_level, LogLevel::info);
  // Any case, as NCCL_DEBUG=INFO: SYNK_LOG=INFO ended the job.
  EXPECT_EQ(parse({{"SYNK_LOG", "INFO"}}).log_level, LogLevel::info);
  EXPECT_EQ(parse({{"SYNK_LOG", "Debug"}}).log_level, LogLevel::debug);
  EXPECT_EQ(parse({{"SYNK_SHM_STREAM", "auto"}}).shm.store_mode, shm::StoreMode::tuned);
  EXPECT_EQ(parse({{"SYNK_SHM_STREAM", "always"}}).shm.store_mode, shm::StoreMode::streaming);
  EXPECT_EQ(parse({{"SYNK_SHM_STREAM", "never"}}).shm.store_mode, shm::StoreMode::ordinary);
  EXPECT_EQ(parse({{"SYNK_SHM_SPIN_US", "0"}}).shm.spin_us, 0);
  EXPECT_EQ(parse({{"SYNK_SHM_SPIN_US", "10000"}}).shm.spin_us, 10000);
  // The launcher's local rank: synkrun's, else plain mpirun's (a split communicator counted
  // its own ranks, and two halves of a node took the same GPUs); SYNK_LOCAL_RANK wins.
  EXPECT_EQ(parse({}).launcher_local_rank, -1);
  EXPECT_EQ(parse({{"OMPI_COMM_WORLD_LOCAL_RANK", "5"}}).launcher_local_rank, 5);
  EXPECT_EQ(parse({{"SYNK_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "5"}}).launcher_local_rank,
            2);
  EXPECT_FALSE(parse({}).shm.named_segments_only);
  EXPECT_TRUE(parse({{"SYNK_SHM_SEGMENTS", "named"}}).shm.named_segments_only);
  EXPECT_EQ(parse({}).mpi_threads, "multiple");
  EXPECT_EQ(parse({{"SYNK_MPI_THREADS", " serialized"}}).mpi_threads, "serialized");
}

TEST(Env, BadValuesAreClearErrors) {
  expect_rejected("SYNK_BACKEND", "gloo");
  expect_rejected("SYNK_LOG", "verbose");
  expect_rejected("SYNK_TIMEOUT", "abc");
  expect_rejected("SYNK_TIMEOUT", "-1");
  expect_rejected("SYNK_TIMEOUT", "0");
  expect_rejected("SYNK_TIMEOUT", "1e10");  // its nanoseconds would overflow
  expect_rejected("SYNK_TIMEOUT", "5s");
  expect_rejected("SYNK_TIMEOUT", "inf");
  expect_rejected("SYNK_SIMULATE_NODES", "0");
  expect_rejected("SYNK_SIMULATE_NODES", "two");
  expect_rejected("SYNK_CHECK_CALLS", "yes");
  expect_rejected("SYNK_MPI_MAX_CHUNK", "-5");
  expect_rejected("SYNK_MPI_MAX_CHUNK", "99999999999");
  expect_rejected("SYNK_SHM_STREAM", "yes");
  expect_rejected("SYNK_SHM_STREAM", "ALWAYS");
  expect_rejected("SYNK_SHM_SPIN_US", "-1");
  expect_rejected("SYNK_SHM_SPIN_US", "1ms");
  expect_rejected("SYNK_SHM_SPIN_US", "60000001");
  expect_rejected("SYNK_SHM_ONE_STEP_BYTES", "-1");
  expect_rejected("SYNK_SHM_ONE_STEP_BYTES", "32K");
  expect_rejected("SYNK_SHM_ROOT_REDUCES_BYTES", "-2");
  expect_rejected("SYNK_SHM_SEGMENTS", "anonymous");
  expect_rejected("SYNK_MPI_THREADS", "single");
  expect_rejected("SYNK_MPI_THREADS", "MULTIPLE");
  // Refused when read, whatever the backend (SYNK_GPU=abc ran on shm; a bad SYNK_SHM_ALGO too).
  expect_rejected("SYNK_GPU", "abc");
  expect_rejected("SYNK_GPU", "1,x");
  expect_rejected("SYNK_GPU", "-1");
  expect_rejected("SYNK_GPU", "1,,2");
  expect_rejected("SYNK_GPU", "2 ,3");  // as the nccl backend reads it
  expect_rejected("SYNK_GPU", "-0");
  expect_rejected("SYNK_SHM_ALGO", "all_gather=fast");
  EXPECT_EQ(parse({{"SYNK_GPU", "1,2"}}).device.gpu, "1,2");
}

// One rule for every variable: spaces and tabs around a value are ignored (a value pasted with a
// stray space is still meant), anything else malformed is refused naming the value as given.
// Before, integers took ' 1' (strtoll skips it) but refused '1 ', and SYNK_TIMEOUT='5 ' and
// SYNK_BACKEND=' mpi' were errors.
TEST(Env, SurroundingSpacesAndTabsAreTrimmedForEveryVariable) {
  const AllSettings s = parse({{"SYNK_BACKEND", " mpi"},
                            {"SYNK_LOG", "debug "},
                            {"SYNK_TIMEOUT", "5 "},
                            {"SYNK_SIMULATE_NODES", "\t2\t"},
                            {"SYNK_CHECK_CALLS", " 1"},
                            {"SYNK_MPI_MAX_CHUNK", " 1000 "},
                            {"SYNK_SHM_SLOT_BYTES", "\t8192"},
                            {"SYNK_SHM_CMA_BYTES", "0 "},
                            {"SYNK_SHM_ONE_STEP_BYTES", " 4096"},
                            {"SYNK_SHM_ROOT_REDUCES_BYTES", "0"},
                            {"SYNK_SHM_SPIN_US", " \t10 \t"},
                            {"SYNK_SHM_STREAM", " never"},
                            {"SYNK_SHM_SEGMENTS", "named\t"},
                            {"SYNK_CONTEXTS", " a->cuda0 "},
                            {"SYNK_GPU", " 2,3 "},
                            {"SYNK_LOCAL_RANK", "\t3 "}});
  EXPECT_EQ(s.backend, "mpi");
  EXPECT_EQ(s.log_level, LogLevel::debug);
  EXPECT_DOUBLE_EQ(s.timeout_s, 5.0);
  EXPECT_EQ(s.simulate_nodes, 2);
  EXPECT_TRUE(s.check_calls);
  EXPECT_EQ(s.mpi.max_chunk, 1000u);
  EXPECT_EQ(s.shm.slot_bytes, 8192u);
  EXPECT_EQ(s.shm.cma_bytes, 0);
  EXPECT_EQ(s.shm.one_step_bytes, 4096);
  EXPECT_EQ(s.shm.root_reduces_bytes, 0);
  EXPECT_EQ(s.shm.spin_us, 10);
  EXPECT_EQ(s.shm.store_mode, shm::StoreMode::ordinary);
  EXPECT_TRUE(s.shm.named_segments_only);
  EXPECT_EQ(s.device.contexts, "a->cuda0");
  EXPECT_EQ(s.device.gpu, "2,3");
  EXPECT_EQ(s.launcher_local_rank, 3);
  EXPECT_EQ(parse({{"OMPI_COMM_WORLD_LOCAL_RANK", " 4\t"}}).launcher_local_rank, 4);
  // Only blanks: unset, as an empty value is.
  const AllSettings blank = parse({{"SYNK_TIMEOUT", " \t "}, {"SYNK_BACKEND", " "}});
  EXPECT_DOUBLE_EQ(blank.timeout_s, 300.0);
  EXPECT_EQ(blank.backend, "auto");
  // Malformed once trimmed, or white space other than spaces and tabs (which strtoll and strtod
  // would have skipped): refused, naming the value as it was given.
  expect_rejected("SYNK_TIMEOUT", " 5 s ");
  expect_rejected("SYNK_TIMEOUT", "\n5");
  expect_rejected("SYNK_CHECK_CALLS", "1 1");
  expect_rejected("SYNK_CHECK_CALLS", "\n1");
  expect_rejected("SYNK_SIMULATE_NODES", "\t2x\t");
  expect_rejected("SYNK_BACKEND", " m pi ");
  expect_rejected("SYNK_SHM_STREAM", "never\n");
  try {
    parse({{"SYNK_TIMEOUT", " 5 s "}});
    ADD_FAILURE() << "SYNK_TIMEOUT=' 5 s ' was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "synk InvalidArgument: SYNK_TIMEOUT=' 5 s ' is not valid: expected a positive number "
              "of seconds, at most 1e9");
  }
}


// SYNK_BACKEND's names and the text of its error come from one list (kBackendChoices); hier is
// what auto makes across nodes, not a name to ask for.
TEST(Env, BackendNamesComeFromOneList) {
  for (std::string_view b : detail::kBackendChoices) {
    EXPECT_EQ(parse({{"SYNK_BACKEND", std::string(b)}}).backend, b);
  }
  EXPECT_THAT(detail::backend_choices_text(), StartsWith("auto, mpi, shm or nccl ("));
  try {
    parse({{"SYNK_BACKEND", "hier"}});
    ADD_FAILURE() << "SYNK_BACKEND=hier was accepted";
  } catch (const Error& e) {
    // It says how hier is had, where users read the README's backend table and tried its name.
    EXPECT_THAT(e.what(), HasSubstr("auto, mpi, shm or nccl (hier is not asked for by name: "
                                    "auto picks it when the ranks span nodes, and "
                                    "SYNK_SIMULATE_NODES=N tries it on one node)"));
  }
}

// SYNK_BACKEND takes any case, as SYNK_LOG does (SYNK_BACKEND=Shm was refused).
TEST(Env, BackendNamesInAnyCase) {
  EXPECT_EQ(parse({{"SYNK_BACKEND", "Shm"}}).backend, "shm");
  EXPECT_EQ(parse({{"SYNK_BACKEND", "MPI"}}).backend, "mpi");
}
}  // namespace
}  // namespace synk::detail
