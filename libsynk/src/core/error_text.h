// The text of a synk::Error without the "synk <Code>: " prefix its constructor adds, for code
// that passes a caught error on (to other ranks, or into a new Error, which adds it again).
#pragma once

#include <string>

#include "synk/error.h"

namespace synk::detail {

inline std::string message_of(const Error& e) {
  std::string text = e.what();
  const auto colon = text.find(": ");
  if (text.rfind("synk ", 0) == 0 && colon != std::string::npos) text = text.substr(colon + 2);
  return text;
}

}  // namespace synk::detail
