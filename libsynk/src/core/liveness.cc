// See liveness.h.
#include "core/liveness.h"

#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace synk::detail {

bool process_alive(long long pid) {
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (std::getline(stat, line)) {
    const auto close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') {
      return false;
    }
  }
  return true;
}

std::uint64_t pid_namespace_id() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

bool pid_watchable(long long pid, std::uint64_t peer_namespace, std::uint64_t own_namespace) {
  if (pid <= 0) return false;
  if (peer_namespace != 0 && own_namespace != 0) return peer_namespace == own_namespace;
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace synk::detail
