// SYNK_LOG logging: one line per message on stderr, prefixed with host, pid and rank.
#pragma once

#include <sstream>
#include <string>

#include "core/env.h"

namespace synk::detail {

bool log_enabled(LogLevel level);
void log_line(LogLevel level, const std::string& message);
// The rank shown in log lines of this process (set once the world communicator exists).
void set_log_rank(int rank);

}  // namespace synk::detail

// SYNK_LOG_AT(info, "backend " << name): the stream expression is built only when enabled.
#define SYNK_LOG_AT(level, expr)                                               \
  do {                                                                         \
    if (::synk::detail::log_enabled(::synk::detail::LogLevel::level)) {        \
      std::ostringstream synk_log_os_;                                         \
      synk_log_os_ << expr;                                                    \
      ::synk::detail::log_line(::synk::detail::LogLevel::level, synk_log_os_.str()); \
    }                                                                          \
  } while (0)
