// Anonymous segments (segment.h) with real processes: another process maps one only through
// its creator's descriptor, and a creator killed before anyone mapped it leaves nothing in
// /dev/shm (a named segment's name stayed until every rank had mapped it).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "backends/shm/segment.h"
#include "expect_refused.h"
#include "fork_harness.h"
#include "synk/error.h"

namespace synk::shm::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::set<std::string> synk_names_in_dev_shm() {
  const std::vector<std::string> names = synk_segments();
  return {names.begin(), names.end()};
}

// Runs fn in a child process; its return value is the child's exit code.
template <class Fn>
int in_child(Fn&& fn) {
  const pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ShmAnonymousSegment, HasNoNameInDevShmAndModeSixHundred) {
  const auto before = synk_names_in_dev_shm();
  Segment s = Segment::create_anonymous(8192);
  EXPECT_THAT(s.name(), StartsWith(std::string("memfd:") + kSegmentPrefix));
  EXPECT_EQ(s.name().size(), std::string("memfd:").size() + std::strlen(kSegmentPrefix) + 24);
  EXPECT_EQ(synk_names_in_dev_shm(), before);
  const SegmentHandle h = s.handle();
  EXPECT_EQ(h.pid, getpid());
  struct stat st {};
  ASSERT_EQ(fstat(static_cast<int>(h.fd), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(static_cast<std::size_t>(st.st_size), 8192u);
  EXPECT_EQ(static_cast<const unsigned char*>(s.data())[8191], 0);  // zero-filled
}

// Nobody can shrink it under the ranks (a SIGBUS at their next touch of a lost page), nor grow it.
TEST(ShmAnonymousSegment, ItsSizeIsSealed) {
  Segment s = Segment::create_anonymous(8192);
  const int fd = static_cast<int>(s.handle().fd);
  EXPECT_NE(ftruncate(fd, 4096), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(fd, 16384), 0);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 8192);
  EXPECT_EQ(fcntl(fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
}

TEST(ShmAnonymousSegment, AnotherProcessMapsItThroughTheHandleAndSharesItsMemory) {
  Segment s = Segment::create_anonymous(1 << 20);
  auto* words = static_cast<volatile std::uint64_t*>(s.data());
  words[0] = 0x5eed;
  const SegmentHandle h = s.handle();
  // The child is another process: it opens /proc/<our pid>/fd/<fd>, as a rank would.
  EXPECT_EQ(in_child([&] {
              try {
                Segment mine = Segment::open_anonymous(h, 1 << 20);
                auto* w = static_cast<volatile std::uint64_t*>(mine.data());
                if (w[0] != 0x5eed) return 2;
                w[(1 << 17) - 1] = 0xfeed;  // the last word
                return mine.name() == s.name() ? 0 : 3;
              } catch (const Error&) {
                return 1;
              }
            }),
            0);
  EXPECT_EQ(words[(1 << 17) - 1], 0xfeedu);
  // Once the creator closes its descriptor (every rank mapped it), nobody can reach it.
  s.close_handle();
  EXPECT_EQ(in_child([&] {
              try {
                Segment late = Segment::open_anonymous(h, 1 << 20);
                return 1;
              } catch (const Error& e) {
                return e.code() == ErrorCode::System ? 0 : 2;
              }
            }),
            0);
}

TEST(ShmAnonymousSegment, AHandleThatLeadsToAnotherFileOrSizeIsRefused) {
  Segment s = Segment::create_anonymous(8192);
  SegmentHandle other_file = s.handle();
  other_file.ino += 1;  // as if the pid had been reused by a process with another file there
  expect_refused([&] { Segment::open_anonymous(other_file, 8192); }, ErrorCode::InvalidUsage,
                 "is not the segment its creator made", "another file was used");
  expect_refused([&] { Segment::open_anonymous(s.handle(), 4096); }, ErrorCode::InvalidUsage,
                 "8192 bytes", "a segment of another size was used");
  SegmentHandle gone = s.handle();
  gone.fd = 100000;
  expect_refused([&] { Segment::open_anonymous(gone, 8192); }, ErrorCode::System, "/fd/100000",
                 "no error for a descriptor that is not open");
}

// The crash that used to leave a segment behind: the creator dies after creating it, before
// the others have mapped it (a named segment is unlinked only after that).
TEST(ShmAnonymousSegment, ACreatorKilledBeforeTheOthersMapItLeavesNothing) {
  const auto before = synk_names_in_dev_shm();
  int handle_pipe[2];
  ASSERT_EQ(pipe(handle_pipe), 0);
  const pid_t creator = fork();
  if (creator == 0) {  // never returns into the test: it writes the handle, or nothing
    close(handle_pipe[0]);
    try {
      Segment s = Segment::create_anonymous(1 << 20);
      const SegmentHandle h = s.handle();
      if (write(handle_pipe[1], &h, sizeof h) != static_cast<ssize_t>(sizeof h)) _exit(1);
      pause();
    } catch (...) {
      _exit(2);
    }
    _exit(0);
  }
  close(handle_pipe[1]);
  SegmentHandle h;
  ASSERT_EQ(read(handle_pipe[0], &h, sizeof h), static_cast<ssize_t>(sizeof h));
  close(handle_pipe[0]);
  EXPECT_EQ(synk_names_in_dev_shm(), before);  // never a name, even while it exists
  ASSERT_EQ(kill(creator, SIGKILL), 0);
  ASSERT_EQ(waitpid(creator, nullptr, 0), creator);
  EXPECT_EQ(synk_names_in_dev_shm(), before);
  expect_refused([&] { Segment::open_anonymous(h, 1 << 20); }, ErrorCode::System, "",
                 "the dead creator's segment was still reachable");
}

}  // namespace
}  // namespace synk::shm::testing
