// The launching synkrun's view of this machine, handed to the ranks on its host so that they
// skip hwloc's slow PCI discovery: an in-memory file (memfd) that lives exactly as long as
// synkrun, read by the ranks through /proc/<synkrun's pid>/fd/<fd>. Nothing is left in /tmp
// whatever ends synkrun, SIGKILL included.
#pragma once

#include <string>

namespace synk::launch {

class TopologyExport {
 public:
  // Holds `xml` in a new memfd. Throws std::runtime_error naming the failed call.
  static TopologyExport create(const std::string& xml);

  TopologyExport() = default;
  ~TopologyExport();
  TopologyExport(TopologyExport&& other) noexcept;
  TopologyExport& operator=(TopologyExport&& other) noexcept;
  TopologyExport(const TopologyExport&) = delete;
  TopologyExport& operator=(const TopologyExport&) = delete;

  // Where another process of this user finds the text while this object lives ("" if none).
  const std::string& path() const { return path_; }

  // This machine as the ranks tell it from another: its host name and the kernel's boot id
  // (hosts cloned from one image may share a name; a boot id is the kernel's own).
  static std::string machine();
  // Whether `path` is an export that this machine's process table still holds: a /proc path
  // of another process's fd is valid only on its machine, and only while that process lives.
  static bool is_export(const std::string& path);

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace synk::launch
