// Open MPI's shared memory of a job on one host (its vader segments, 4 MiB a rank) in a
// directory of synkrun's in /dev/shm, removed when the job ends. A job killed at once (a second
// Ctrl-C, mpirun killed) left the segments in /dev/shm, where nobody removed them. synkrun holds
// an exclusive flock on the directory while it lives, so a later synkrun that gets the lock
// knows the directory's synkrun is gone (in any PID namespace) and removes it.
#pragma once

#include <string>
#include <vector>

namespace synk::launch {

class JobShmDir {
 public:
  // A new directory in `parent`, locked; none (path() "") where it cannot be made.
  static JobShmDir create(const std::string& parent = "/dev/shm");

  JobShmDir() = default;
  ~JobShmDir();  // removes the directory and what the job left in it
  JobShmDir(JobShmDir&& other) noexcept;
  JobShmDir& operator=(JobShmDir&& other) noexcept;
  JobShmDir(const JobShmDir&) = delete;
  JobShmDir& operator=(const JobShmDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;  // the directory, holding the flock
  std::string path_;
};

// Removes the job directories in `parent` whose synkrun is gone and returns their names. Never
// throws; what cannot be read is left alone.
std::vector<std::string> remove_stale_job_dirs(const std::string& parent = "/dev/shm");

}  // namespace synk::launch
