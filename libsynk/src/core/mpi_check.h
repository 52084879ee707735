// SYNK_CHECK_MPI(expr): an MPI return code other than MPI_SUCCESS becomes a synk::Error(Backend)
// naming the MPI function and carrying MPI's own message and error class. synk's communicators
// return errors (MPI_ERRORS_RETURN) instead of aborting, so this sees them.
#pragma once

#include <mpi.h>

#include <string>
#include <string_view>

#include "core/call_name.h"
#include "synk/error.h"

namespace synk::detail {

void note_peer_lost() noexcept;  // core/mpi_runtime.h

// Whether the MPI function `call` names talks to other ranks (a collective, a send or receive,
// a communicator made by all): where one fails, another rank may be left in it.
constexpr bool communicates(std::string_view call) {
  for (std::string_view local : {"MPI_Comm_size", "MPI_Comm_rank", "MPI_Comm_set_errhandler",
                                 "MPI_Comm_set_attr", "MPI_Comm_get_attr", "MPI_Comm_free",
                                 "MPI_Comm_create_keyval", "MPI_Comm_group", "MPI_Comm_test_inter",
                                 "MPI_Group_", "MPI_Type_", "MPI_Init_thread"}) {
    if (call.substr(0, local.size()) == local) return false;
  }
  return true;
}

// "MPI_Bcast failed: MPI_ERR_COUNT: invalid count argument (error class 2)". `call` names the
// MPI function (and, for a caller that says more, what it was doing), never its arguments' code.
// Where it communicates, another rank may be left in the call that failed here (MPI_ERR_TRUNCATE
// of a count it gave otherwise), and MPI_Finalize would wait for it for ever: the exit handler
// skips it from now on.
[[noreturn]] inline void throw_mpi_error(int rc, std::string_view call) {
  if (communicates(call)) note_peer_lost();
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  int error_class = rc;
  if (MPI_Error_class(rc, &error_class) != MPI_SUCCESS) error_class = rc;
  std::string text = std::string(call) + " failed: ";
  text += len ? std::string(msg, static_cast<std::size_t>(len)) : "error " + std::to_string(rc);
  throw Error(ErrorCode::Backend, text + " (error class " + std::to_string(error_class) + ")");
}

}  // namespace synk::detail

#define SYNK_CHECK_MPI(expr)                                                              \
  do {                                                                                    \
    const int synk_mpi_rc_ = (expr);                                                      \
    if (synk_mpi_rc_ != MPI_SUCCESS) {                                                    \
      ::synk::detail::throw_mpi_error(synk_mpi_rc_, ::synk::detail::call_name(#expr));    \
    }                                                                                     \
  } while (0)
