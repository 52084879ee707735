// A shared-memory segment, of one of two kinds:
//  - anonymous (create_anonymous): a memfd, which has no name in /dev/shm at any moment, so no
//    crash, of any rank at any time, can leave it behind. The others map it through the
//    creator's descriptor (/proc/<pid>/fd/<fd>: the kernel lets only the creator's user, or
//    root, open it), checking that the file they got is the one the creator made;
//  - named (create): a POSIX segment created with O_EXCL under an unguessable name, mode 0600,
//    and unlinked as soon as every user has mapped it. Until then a creator killed (or a job
//    aborted) leaves the name behind, locked by no one: the next job's set-up, or synkrun at the
//    job's end, removes it (stale_segments.h). share_segment (shm_backend.h) uses it only where
//    the anonymous kind cannot be shared (ranks in different PID namespaces, /proc not mounted).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace synk::shm {

// Where another process finds an anonymous segment, and what it must turn out to be: the
// creator's pid may be reused, or belong to another PID namespace, so the opener compares the
// file's device and inode with the creator's.
struct SegmentHandle {
  std::int64_t pid = 0;
  std::int64_t fd = -1;
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
};

class Segment {
 public:
  // Creates and maps a zero-filled anonymous segment (memfd, mode 0600) of `bytes`, named
  // "memfd:synk-<24 hex digits>" in /proc/<pid>/maps. Its descriptor stays open for peers
  // (handle()) until close_handle(). Throws synk::Error(System) naming the failed call.
  static Segment create_anonymous(std::size_t bytes);
  // Maps another process's anonymous segment. Throws synk::Error(System) where it cannot be
  // opened, and InvalidUsage where the file found is not the one `h` describes or has another
  // owner, mode or size.
  static Segment open_anonymous(const SegmentHandle& h, std::size_t bytes);

  // Creates and maps a new zero-filled segment of `bytes` under a fresh random name
  // ("/synk-<24 hex digits>"), holding an exclusive flock on it until unlink(). Throws
  // synk::Error(System) naming the failed call.
  static Segment create(std::size_t bytes);
  // Maps an existing segment made by create(). Refuses (InvalidUsage) one that is not owned by
  // this user, has another mode than 0600, or another size.
  static Segment open(const std::string& name, std::size_t bytes);

  Segment() = default;
  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Removes the name (then releases the creator's lock); the mapping stays valid until
  // destruction. Idempotent, never throws.
  void unlink() noexcept;
  // An anonymous segment's descriptor, for open_anonymous in another process.
  SegmentHandle handle() const;
  // Closes that descriptor once every peer has mapped the segment (the mappings keep it).
  // Idempotent, never throws.
  void close_handle() noexcept;

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, void* data, std::size_t size, bool owns_name);
  std::string name_;
  void* data_ = nullptr;
  std::size_t size_ = 0;
  bool linked_ = false;  // this object created the name and has not unlinked it yet
  int lock_fd_ = -1;     // a named segment's creator: its descriptor, locked until unlink()
  int fd_ = -1;          // an anonymous segment's descriptor, open until close_handle()
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// The prefix of every segment name synk creates (for tests that look for leftovers).
inline constexpr const char* kSegmentPrefix = "synk-";

}  // namespace synk::shm
