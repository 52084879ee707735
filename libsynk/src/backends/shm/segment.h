// A POSIX shared-memory segment: created with O_EXCL under an unguessable name, mode 0600,
// mapped, and unlinked as soon as every user has mapped it, so a crash leaves nothing behind.
#pragma once

#include <cstddef>
#include <string>

namespace synk::shm {

class Segment {
 public:
  // Creates and maps a new zero-filled segment of `bytes` under a fresh random name
  // ("/synk-<24 hex digits>"). Throws synk::Error(System) naming the failed call.
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

  // Removes the name; the mapping stays valid until destruction. Idempotent, never throws.
  void unlink() noexcept;

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, void* data, std::size_t size, bool owns_name);
  std::string name_;
  void* data_ = nullptr;
  std::size_t size_ = 0;
  bool linked_ = false;  // this object created the name and has not unlinked it yet
};

// The prefix of every segment name synk creates (for tests that look for leftovers).
inline constexpr const char* kSegmentPrefix = "synk-";

}  // namespace synk::shm
