// See job_shm_dir.h.
#include "job_shm_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <utility>

namespace synk::launch {

namespace {

constexpr const char* kPrefix = "synkrun-job.";
// A directory this new may be one whose synkrun is between making and locking it.
constexpr std::time_t kGraceSeconds = 60;

void remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace

JobShmDir JobShmDir::create(const std::string& parent) {
  std::string name = parent + "/" + kPrefix + "XXXXXX";
  if (mkdtemp(name.data()) == nullptr) return {};
  const int fd = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (fd >= 0) ::close(fd);
    remove_tree(name);
    return {};
  }
  JobShmDir d;
  d.fd_ = fd;
  d.path_ = std::move(name);
  return d;
}

JobShmDir::~JobShmDir() {
  if (path_.empty()) return;
  remove_tree(path_);
  ::close(fd_);
}

JobShmDir::JobShmDir(JobShmDir&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::exchange(other.path_, {})) {}

JobShmDir& JobShmDir::operator=(JobShmDir&& other) noexcept {
  std::swap(fd_, other.fd_);
  std::swap(path_, other.path_);
  return *this;
}

std::vector<std::string> remove_stale_job_dirs(const std::string& parent) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || !entry.is_directory(ec)) continue;
    struct stat st {};
    if (stat(entry.path().c_str(), &st) != 0 || std::time(nullptr) - st.st_mtime < kGraceSeconds) {
      continue;
    }
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {  // its synkrun is gone
      remove_tree(entry.path().string());
      removed.push_back(name);
    }
    ::close(fd);
  }
  return removed;
}

}  // namespace synk::launch
