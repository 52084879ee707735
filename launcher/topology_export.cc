// See topology_export.h.
#include "topology_export.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "core/write_all.h"

namespace synk::launch {

TopologyExport TopologyExport::create(const std::string& xml) {
  // Close-on-exec: mpirun need not hold it; the ranks open it through synkrun's table.
  const int fd = memfd_create("synkrun-topology.xml", MFD_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  TopologyExport e;
  e.fd_ = fd;
  if (!detail::write_all(fd, xml.data(), xml.size())) {
    throw std::runtime_error(std::string("write: ") + std::strerror(errno));
  }
  e.path_ = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd);
  return e;
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
