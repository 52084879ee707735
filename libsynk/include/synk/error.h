// synk::Error, the one exception type of libsynk, and its codes.
// Errors a caller can handle are thrown as synk::Error; invariants are assertions.
#pragma once

#include <stdexcept>
#include <string>

namespace synk {

enum class ErrorCode {
  InvalidArgument,  // a value the call cannot take: null buffer, root out of range, avg on ints
  InvalidUsage,     // a call that is wrong in context: overlapping buffers, mismatched calls
  NotSupported,     // a feature this build or machine does not have
  System,           // an operating-system call failed (errno)
  Backend,          // MPI, NCCL or CUDA reported an error
  Timeout,          // a blocking wait passed its deadline (SYNK_TIMEOUT)
  Remote,           // another rank failed; the message names it
};

const char* to_string(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }
  // The message as given to the constructor, without what()'s "synk <Code>: " prefix: for
  // passing a caught error on (to other ranks, or into a new Error, which adds a prefix again).
  std::string message() const;

 private:
  ErrorCode code_;
};

}  // namespace synk
