// The one nccl-backend communicator a device test binary shares: made on first use, freed
// before MPI_Finalize (by a GoogleTest environment), as NCCL needs. Include from one file per
// test binary.
#pragma once

#include <dlfcn.h>
#include <mpi.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "synk/communicator.h"
#include "synk/error.h"

namespace synk::testing {

inline std::unique_ptr<synk::Communicator>& nccl_slot() {
  static std::unique_ptr<synk::Communicator> comm;
  return comm;
}

inline synk::Communicator& nccl() {
  auto& slot = nccl_slot();
  if (!slot) slot = std::make_unique<synk::Communicator>(MPI_COMM_WORLD, synk::CommOptions{"nccl"});
  return *slot;
}

// Why this binary's NCCL tests cannot run although a device is visible, or nothing: more ranks on
// a node than it has GPUs (NCCL needs a device per rank; a 1-GPU workstation running the np2
// entries), which the bootstrap refuses with InvalidUsage on every rank. Makes the communicator,
// so every rank calls it at the same point (a fixture's SetUp, after the no-device check).
// The ranks agree on it, so that none skips while another goes on into a collective.
inline const std::optional<std::string>& nccl_unavailable() {
  static const std::optional<std::string> why = []() -> std::optional<std::string> {
    std::optional<std::string> mine;
    int shared_device = 0;
    try {
      nccl();
    } catch (const synk::Error& e) {
      if (e.code() != synk::ErrorCode::InvalidUsage) throw;
      shared_device = 1;
      mine = std::string("NCCL needs a CUDA device per rank: ") + e.what();
    }
    int any = 0;
    MPI_Allreduce(&shared_device, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && !mine) mine = "NCCL needs a CUDA device per rank: another rank shares its GPU";
    return mine;
  }();
  return why;
}

class NcclEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { nccl_slot().reset(); }
};
[[maybe_unused]] inline ::testing::Environment* const kNcclEnvironment =
    ::testing::AddGlobalTestEnvironment(new NcclEnvironment);

// The fake NCCL's count of calls begun in this process (fake_nccl.cc), or -1 without the fake.
inline long fake_nccl_calls() {
  using Fn = long (*)();
  const auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "synk_fake_nccl_calls"));
  return fn ? fn() : -1;
}

}  // namespace synk::testing
