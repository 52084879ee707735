// Arguments refused on some ranks only, refused on every rank: a rank's own checks run first,
// the ranks agree on who failed, and every rank raises (its own error where it failed, a Remote
// naming the first that did elsewhere), so that none is left waiting in the call.
#pragma once

#include <optional>
#include <string>

#include "synk/communicator.h"
#include "synk/error.h"

namespace synk::python {

// A rank's own checks of its arguments, run before the ranks agree: the synk error they throw,
// if any, which the agreement then makes an error on every rank.
template <class Checks>
std::optional<Error> failure_of(Checks&& checks) {
  try {
    checks();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// After an agreement in which rank `first` was the lowest to fail its checks (`mine`: this
// rank's failure, if any): as libsynk's own comparison of calls, this rank raises its own error
// where it failed, the others a Remote naming `first` with its text (which travels only now).
[[noreturn]] void fail_as_agreed(Communicator& c, const std::string& op, int first,
                                 const std::optional<Error>& mine);

// The agreement where nothing else travels: one all_reduce of the lowest failing rank (the GIL
// released), then fail_as_agreed where some rank failed. Returns where none did.
void refuse_where_any_failed(Communicator& c, const std::string& op,
                             const std::optional<Error>& mine);

}  // namespace synk::python
