// SYNK_CHECK_MPI(expr): an MPI return code other than MPI_SUCCESS becomes a synk::Error(Backend)
// carrying the call's text and MPI's own message. synk's communicators return errors
// (MPI_ERRORS_RETURN) instead of aborting, so this sees them.
#pragma once

#include <mpi.h>

#include <string>

#include "synk/error.h"

namespace synk::detail {

[[noreturn]] inline void throw_mpi_error(int rc, const char* call) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  throw Error(ErrorCode::Backend,
              std::string(call) + " failed: " + (len ? std::string(msg, len) : "error " + std::to_string(rc)));
}

}  // namespace synk::detail

#define SYNK_CHECK_MPI(expr)                                              \
  do {                                                                    \
    const int synk_mpi_rc_ = (expr);                                      \
    if (synk_mpi_rc_ != MPI_SUCCESS) ::synk::detail::throw_mpi_error(synk_mpi_rc_, #expr); \
  } while (0)
