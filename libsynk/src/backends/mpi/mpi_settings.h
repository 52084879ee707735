// The mpi backend's setting (and hier's, which sends across nodes through it).
#pragma once

#include <climits>
#include <cstddef>

#include "core/env.h"

namespace synk::detail {

struct MpiSettings {
  std::size_t max_chunk = 0;  // SYNK_MPI_MAX_CHUNK: elements per MPI call (0: INT_MAX)

  // Elements per MPI call: MPI counts are ints.
  std::size_t max_chunk_in_effect() const {
    return max_chunk ? max_chunk : static_cast<std::size_t>(INT_MAX);
  }

  static MpiSettings parse(const EnvGetter& get);
};

inline const MpiSettings& mpi_settings() { return env::cached<MpiSettings>(); }

}  // namespace synk::detail
