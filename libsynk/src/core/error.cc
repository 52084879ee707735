// synk::Error and the names of its codes.
#include "synk/error.h"

namespace synk {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::InvalidUsage: return "InvalidUsage";
    case ErrorCode::NotSupported: return "NotSupported";
    case ErrorCode::System: return "System";
    case ErrorCode::Backend: return "Backend";
    case ErrorCode::Timeout: return "Timeout";
    case ErrorCode::Remote: return "Remote";
  }
  return "Unknown";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error("synk " + std::string(to_string(code)) + ": " + message), code_(code) {}

std::string Error::message() const {
  // what() is the prefix the constructor wrote, then the message.
  const std::size_t prefix = std::char_traits<char>::length(to_string(code_)) + 7;  // "synk " ": "
  return std::string(std::runtime_error::what() + prefix);
}

}  // namespace synk
