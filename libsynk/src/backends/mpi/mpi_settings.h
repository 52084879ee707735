// The mpi backend's setting (and hier's, which sends across nodes through it).
#pragma once

#include <cstddef>

#include "core/env.h"

namespace synk::detail {

struct MpiSettings {
  std::size_t max_chunk = 0;  // SYNK_MPI_MAX_CHUNK: elements per MPI call (0: INT_MAX)

  static MpiSettings parse(const EnvGetter& get);
};

inline const MpiSettings& mpi_settings() { return env::cached<MpiSettings>(); }

}  // namespace synk::detail
