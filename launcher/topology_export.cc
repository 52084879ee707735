// See topology_export.h.
#include "topology_export.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "core/write_all.h"

namespace synk::launch {
namespace {

constexpr char kMemfdName[] = "synkrun-topology.xml";

}  // namespace

TopologyExport TopologyExport::create(const std::string& xml) {
  // Close-on-exec: mpirun need not hold it; the ranks open it through synkrun's table.
  const int fd = memfd_create(kMemfdName, MFD_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  TopologyExport e;
  e.fd_ = fd;
  if (!detail::write_all(fd, xml.data(), xml.size())) {
    throw std::runtime_error(std::string("write: ") + std::strerror(errno));
  }
  e.path_ = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd);
  return e;
}

std::string TopologyExport::machine() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return std::string(host) + "/" + boot_id;
}

bool TopologyExport::is_export(const std::string& path) {
  char target[256] = {};
  const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
  // Linux names a memfd's link "/memfd:NAME (deleted)".
  const std::string expected = std::string("/memfd:") + kMemfdName;
  return n > 0 && std::string(target, static_cast<std::size_t>(n)).rfind(expected, 0) == 0 &&
         access(path.c_str(), R_OK) == 0;
}

TopologyExport::~TopologyExport() {
  if (fd_ >= 0) ::close(fd_);
}

TopologyExport::TopologyExport(TopologyExport&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {
  other.path_.clear();
}

TopologyExport& TopologyExport::operator=(TopologyExport&& other) noexcept {
  std::swap(fd_, other.fd_);
  std::swap(path_, other.path_);
  return *this;
}

}  // namespace synk::launch
