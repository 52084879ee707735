// The name of the function in the source text of a call, for error messages:
// "MPI_Allreduce(in_place ? MPI_IN_PLACE : p, ...)" -> "MPI_Allreduce". The arguments are code,
// which means nothing to whoever reads the error.
#pragma once

#include <string_view>

namespace synk::detail {

constexpr std::string_view call_name(std::string_view expr) {
  std::string_view name = expr.substr(0, expr.find('('));
  while (!name.empty() && (name.back() == ' ' || name.back() == '\n')) name.remove_suffix(1);
  return name;
}

}  // namespace synk::detail
