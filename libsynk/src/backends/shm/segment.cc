// See segment.h.
#include "backends/shm/segment.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "synk/error.h"

namespace synk::shm {

namespace {

// Its parameters take their arguments without allocating, so that `errno` passed beside them
// is still the failed call's.
[[noreturn]] void sys_error(const char* call, std::string_view name, int err) {
  throw Error(ErrorCode::System,
              std::string(call) + "(" + std::string(name) + ") failed: " + std::strerror(err));
}

// "synk-" and 24 random hex digits.
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
  std::string name = kSegmentPrefix;
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

// Sizes the new file `fd` and reserves its pages now: where /dev/shm (or the memory cgroup) is
// too small, this is an error naming the size instead of a SIGBUS at the first touch of a
// missing page. A file system without fallocate keeps the sparse file.
// The caller closes `fd` if this throws. `short_of` says what may be too small.
void reserve(int fd, std::size_t bytes, const std::string& name, const char* short_of) {
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    sys_error("ftruncate", name + ", " + std::to_string(bytes) + " bytes", err);
  }
  if (fallocate(fd, 0, 0, static_cast<off_t>(bytes)) != 0 && errno != EOPNOTSUPP &&
      errno != ENOSYS) {
    const int err = errno;
    throw Error(ErrorCode::System,
                "cannot reserve " + std::to_string(bytes) + " bytes of shared memory for " +
                    name + " (fallocate: " + std::strerror(err) + "); " + short_of);
  }
}

// Another user's segment under the same name, or one made with other rights, is not ours.
void check_owner(int fd, const struct stat& st, const std::string& name, std::size_t bytes) {
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
}

}  // namespace

Segment::Segment(std::string name, void* data, std::size_t size, bool owns_name)
    : name_(std::move(name)), data_(data), size_(size), linked_(owns_name) {}

Segment Segment::create(std::size_t bytes) {
  for (int attempt = 0;; ++attempt) {
    std::string name = "/";
    name += random_name();
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      if (errno == EEXIST && attempt < 8) continue;  // astronomically unlikely: pick another name
      sys_error("shm_open", name, errno);
    }
    void* p = nullptr;
    try {
      // Locked before it has a size, and until the name is removed: a sweeper that finds it
      // unlocked with a size knows its creator died (stale_segments.h).
      while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) sys_error("flock", name, errno);
      }
      reserve(fd, bytes, name, "/dev/shm may be too small (df -h /dev/shm)");
      p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) sys_error("mmap", name, errno);
    } catch (...) {
      shm_unlink(name.c_str());
      close(fd);
      throw;
    }
    Segment s(std::move(name), p, bytes, true);
    s.lock_fd_ = fd;
    return s;
  }
}

Segment Segment::create_anonymous(std::size_t bytes) {
  std::string name = "memfd:";
  name += random_name();
  const int fd = memfd_create(name.c_str() + 6, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) sys_error("memfd_create", name, errno);
  struct stat st {};
  void* p = nullptr;
  try {
    // A memfd starts with mode 0777; the creator's user is the only one who can open it
    // through /proc anyway, but the mode says the same as a named segment's.
    if (fchmod(fd, 0600) != 0) sys_error("fchmod", name, errno);
    if (fstat(fd, &st) != 0) sys_error("fstat", name, errno);
    reserve(fd, bytes, name, "the memory available (or the cgroup's limit) may be too small");
    // Its size is fixed from here on, for every process that opens it: a segment shrunk under
    // the ranks would be a SIGBUS at their next touch of a lost page.
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      sys_error("fcntl(F_ADD_SEALS)", name, errno);
    }
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) sys_error("mmap", name, errno);
  } catch (...) {
    close(fd);
    throw;
  }
  Segment s(name, p, bytes, false);
  s.fd_ = fd;
  s.dev_ = st.st_dev;
  s.ino_ = st.st_ino;
  return s;
}

Segment Segment::open_anonymous(const SegmentHandle& h, std::size_t bytes) {
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  // What is behind the descriptor is checked before it is opened (opening a terminal or a FIFO
  // another process happens to hold there would do something), and again once it is open.
  const auto refuse = [&] {
    throw Error(ErrorCode::InvalidUsage, path + " is not the segment its creator made (another "
                                                "file behind that pid and descriptor): refusing "
                                                "to use it");
  };
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) sys_error("stat", path, errno);
  if (st.st_dev != h.dev || st.st_ino != h.ino) refuse();
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) sys_error("open", path, errno);
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    sys_error("fstat", path, err);
  }
  if (st.st_dev != h.dev || st.st_ino != h.ino) {
    close(fd);
    refuse();
  }
  check_owner(fd, st, path, bytes);
  // What /proc/<pid>/maps calls it, for messages.
  char target[128] = {};
  const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
  std::string name = n > 0 ? std::string(target, static_cast<std::size_t>(n)) : path;
  if (name.rfind("/memfd:", 0) == 0) name = name.substr(1);
  if (const auto deleted = name.find(" (deleted)"); deleted != std::string::npos) {
    name.resize(deleted);
  }
  return Segment(std::move(name), map(fd, bytes, path), bytes, false);
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
  check_owner(fd, st, name, bytes);
  return Segment(name, map(fd, bytes, name), bytes, false);
}

Segment::~Segment() {
  unlink();
  close_handle();
  if (data_) munmap(data_, size_);
}

Segment::Segment(Segment&& o) noexcept
    : name_(std::move(o.name_)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      linked_(std::exchange(o.linked_, false)),
      lock_fd_(std::exchange(o.lock_fd_, -1)),
      fd_(std::exchange(o.fd_, -1)),
      dev_(o.dev_),
      ino_(o.ino_) {}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    unlink();
    close_handle();
    if (data_) munmap(data_, size_);
    name_ = std::move(o.name_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    linked_ = std::exchange(o.linked_, false);
    lock_fd_ = std::exchange(o.lock_fd_, -1);
    fd_ = std::exchange(o.fd_, -1);
    dev_ = o.dev_;
    ino_ = o.ino_;
  }
  return *this;
}

SegmentHandle Segment::handle() const {
  SegmentHandle h;
  h.pid = getpid();
  h.fd = fd_;
  h.dev = static_cast<std::uint64_t>(dev_);
  h.ino = static_cast<std::uint64_t>(ino_);
  return h;
}

void Segment::close_handle() noexcept {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
}

void Segment::unlink() noexcept {
  if (linked_) {
    shm_unlink(name_.c_str());
    linked_ = false;
  }
  if (lock_fd_ >= 0) {  // only now: the name is gone, no sweeper can take it for stale
    close(lock_fd_);
    lock_fd_ = -1;
  }
}

}  // namespace synk::shm
