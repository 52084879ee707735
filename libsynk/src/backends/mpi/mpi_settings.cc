// See mpi_settings.h.
#include "backends/mpi/mpi_settings.h"

namespace synk::detail {

MpiSettings MpiSettings::parse(const EnvGetter& get) {
  MpiSettings s;
  if (const auto v = env::read(get, "SYNK_MPI_MAX_CHUNK")) {
    s.max_chunk = static_cast<std::size_t>(env::integer(*v, 0, 2147483647LL));
  }
  return s;
}

}  // namespace synk::detail
