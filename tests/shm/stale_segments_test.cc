// The sweep of named segments whose creator died before every rank had mapped them
// (stale_segments.h), with real processes: what it removes and what it must leave alone.
#include "backends/shm/stale_segments.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/shm/segment.h"

namespace synk::shm::testing {
namespace {

bool exists(const std::string& name) {  // name as shm_open takes it: "/synk-..."
  struct stat st {};
  return stat(("/dev/shm" + name).c_str(), &st) == 0;
}

bool swept(const std::vector<std::string>& removed, const std::string& name) {
  return std::find(removed.begin(), removed.end(), name.substr(1)) != removed.end();
}

// A name left by a creator that dies right after making its segment, as a killed rank leaves it.
std::string name_left_by_a_dead_creator() {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Segment s = Segment::create(1 << 16);
    const std::string& name = s.name();
    if (write(fds[1], name.data(), name.size()) != static_cast<ssize_t>(name.size())) _exit(1);
    _exit(0);  // no destructor: the name stays, as after SIGKILL
  }
  close(fds[1]);
  char buf[128] = {};
  const ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

TEST(StaleSegments, ANameLeftByADeadCreatorIsRemoved) {
  const std::string name = name_left_by_a_dead_creator();
  ASSERT_FALSE(name.empty());
  ASSERT_TRUE(exists(name));
  const std::vector<std::string> removed = remove_stale_segments();
  EXPECT_TRUE(swept(removed, name));
  EXPECT_FALSE(exists(name));
}

TEST(StaleSegments, ALiveCreatorsSegmentIsKept) {
  Segment live = Segment::create(1 << 16);
  EXPECT_FALSE(swept(remove_stale_segments(), live.name()));
  EXPECT_TRUE(exists(live.name()));
  // Its mapping and name are still usable by a peer.
  Segment peer = Segment::open(live.name(), 1 << 16);
  EXPECT_EQ(peer.size(), std::size_t{1} << 16);
}

TEST(StaleSegments, EmptyOrForeignLookingFilesAreKept) {
  // An empty one may be a creator's between creating and locking it; one of another mode was
  // not made by synk.
  const std::string empty = std::string("/") + kSegmentPrefix + "0000000000000000000000e0";
  const std::string other_mode = std::string("/") + kSegmentPrefix + "0000000000000000000000e1";
  const int a = shm_open(empty.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  const int b = shm_open(other_mode.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_EQ(ftruncate(b, 4096), 0);
  ASSERT_EQ(fchmod(b, 0644), 0);
  close(a);
  close(b);
  const std::vector<std::string> removed = remove_stale_segments();
  EXPECT_FALSE(swept(removed, empty));
  EXPECT_FALSE(swept(removed, other_mode));
  EXPECT_EQ(shm_unlink(empty.c_str()), 0);
  EXPECT_EQ(shm_unlink(other_mode.c_str()), 0);
}

}  // namespace
}  // namespace synk::shm::testing
