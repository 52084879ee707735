// Log lines look like: "[synk host:pid r0] info: backend mpi (auto)".
#include "core/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace synk::detail {

namespace {
std::atomic<int> g_rank{-1};
}

bool log_enabled(LogLevel level) {
  try {
    return static_cast<int>(level) <= static_cast<int>(settings().log_level);
  } catch (...) {
    return level == LogLevel::error;  // a malformed SYNK_LOG is reported by the first call
  }
}

void set_log_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

void log_line(LogLevel level, const std::string& message) {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  const int rank = g_rank.load(std::memory_order_relaxed);
  char rank_text[32] = "r?";
  if (rank >= 0) std::snprintf(rank_text, sizeof rank_text, "r%d", rank);
  // One fprintf per line so lines of different ranks do not interleave mid-line.
  std::fprintf(stderr, "[synk %s:%d %s] %s: %s\n", host, static_cast<int>(getpid()), rank_text,
               to_string(level), message.c_str());
}

}  // namespace synk::detail
