// For the standalone multi-rank test programs that a script judges by their output lines
// (check_stuck_rank.sh, check_pid_namespace.sh): one line, written and flushed at once, so
// that ranks' lines do not interleave and none is lost when the job is killed.
#pragma once

#include <cstdio>
#include <string>

namespace synk_test {

inline int say(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace synk_test
