// See segment.h.
#include "backends/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "synk/error.h"

namespace synk::shm {

namespace {

[[noreturn]] void sys_error(const std::string& call, const std::string& name, int err) {
  throw Error(ErrorCode::System, call + "(" + name + ") failed: " + std::strerror(err));
}

std::string random_name() {
  unsigned char bytes[12];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      sys_error("getrandom", "segment name", errno);
    }
    got += static_cast<std::size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string name = std::string("/") + kSegmentPrefix;
  for (unsigned char b : bytes) {
    name += hex[b >> 4];
    name += hex[b & 15];
  }
  return name;
}

void* map(int fd, std::size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    sys_error("mmap", name, err);
  }
  close(fd);
  return p;
}

}  // namespace

Segment::Segment(std::string name, void* data, std::size_t size, bool owns_name)
    : name_(std::move(name)), data_(data), size_(size), linked_(owns_name) {}

Segment Segment::create(std::size_t bytes) {
  for (int attempt = 0;; ++attempt) {
    std::string name = random_name();
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      if (errno == EEXIST && attempt < 8) continue;  // astronomically unlikely: pick another name
      sys_error("shm_open", name, errno);
    }
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int err = errno;
      close(fd);
      shm_unlink(name.c_str());
      sys_error("ftruncate", name + ", " + std::to_string(bytes) + " bytes", err);
    }
    // Reserve the pages now: where /dev/shm is too small (a container's 64 MiB, say) this is
    // an error naming the size, instead of a SIGBUS at the first touch of a missing page.
    // A file system without fallocate keeps the sparse file.
    if (fallocate(fd, 0, 0, static_cast<off_t>(bytes)) != 0 && errno != EOPNOTSUPP &&
        errno != ENOSYS) {
      const int err = errno;
      close(fd);
      shm_unlink(name.c_str());
      throw Error(ErrorCode::System,
                  "cannot reserve " + std::to_string(bytes) + " bytes of shared memory for " +
                      name + " (fallocate: " + std::strerror(err) +
                      "); /dev/shm may be too small (df -h /dev/shm)");
    }
    try {
      void* p = map(fd, bytes, name);
      return Segment(std::move(name), p, bytes, true);
    } catch (...) {
      shm_unlink(name.c_str());
      throw;
    }
  }
}

Segment Segment::open(const std::string& name, std::size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) sys_error("shm_open", name, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    sys_error("fstat", name, err);
  }
  // Another user's segment under the same name, or one made with other rights, is not ours.
  if (st.st_uid != geteuid() || (st.st_mode & 0777) != 0600 ||
      static_cast<std::size_t>(st.st_size) != bytes) {
    close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw Error(ErrorCode::InvalidUsage,
                "shared-memory segment " + name + " (owner uid " + std::to_string(st.st_uid) +
                    ", mode " + mode + ", " + std::to_string(st.st_size) +
                    " bytes) is not the one this job made (expected uid " +
                    std::to_string(geteuid()) + ", mode 0600, " + std::to_string(bytes) +
                    " bytes): refusing to use it");
  }
  return Segment(name, map(fd, bytes, name), bytes, false);
}

Segment::~Segment() {
  unlink();
  if (data_) munmap(data_, size_);
}

Segment::Segment(Segment&& o) noexcept
    : name_(std::move(o.name_)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      linked_(std::exchange(o.linked_, false)) {}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    unlink();
    if (data_) munmap(data_, size_);
    name_ = std::move(o.name_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    linked_ = std::exchange(o.linked_, false);
  }
  return *this;
}

void Segment::unlink() noexcept {
  if (linked_) {
    shm_unlink(name_.c_str());
    linked_ = false;
  }
}

}  // namespace synk::shm
