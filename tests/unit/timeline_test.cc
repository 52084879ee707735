// SYNK_TIMELINE's file form (core/timeline.h) without MPI: each event as written, the escaping of
// names, and a file written by several threads and then appended to by a second "process": "[",
// then whole events each after ",\n", so that appending "]" makes it JSON.
#include "core/timeline.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace synk::detail::timeline {
namespace {

std::string one(const Event& e) {
  std::string out;
  append_event(out, e);
  return out;
}

TEST(Timeline, EventForms) {
  Event b;
  b.ph = 'B';
  b.name = "running";
  b.pid = 1;
  b.tid = 3;
  b.ts_ns = 1234567;
  b.bytes = 4096;
  EXPECT_EQ(one(b),
            R"({"name":"running","ph":"B","pid":1,"tid":3,"ts":1234.567,"args":{"bytes":4096}})");
  Event e;
  e.ph = 'E';
  e.pid = 1;
  e.tid = 3;
  e.ts_ns = 2000005;
  EXPECT_EQ(one(e), R"({"ph":"E","pid":1,"tid":3,"ts":2000.005})");
  Event i;
  i.ph = 'i';
  i.name = "done";
  i.pid = 0;
  i.tid = 2;
  i.ts_ns = 999;
  EXPECT_EQ(one(i),
            R"({"name":"done","ph":"i","s":"t","pid":0,"tid":2,"ts":0.999,"args":{"bytes":0}})");
  Event a;
  a.ph = 'b';
  a.name = "all_reduce queued";
  a.pid = 2;
  a.tid = 1;
  a.id = (std::uint64_t{2} << 32) | 7;
  a.ts_ns = 5000;
  a.bytes = 8;
  EXPECT_EQ(one(a), R"({"name":"all_reduce queued","cat":"synk","ph":"b","id":8589934599,)"
                    R"("pid":2,"tid":1,"ts":5.000,"args":{"bytes":8}})");
  a.ph = 'e';
  EXPECT_EQ(one(a), R"({"name":"all_reduce queued","cat":"synk","ph":"e","id":8589934599,)"
                    R"("pid":2,"tid":1,"ts":5.000})");
  Event m;
  m.ph = 'M';
  m.name = "thread_name";
  m.pid = 0;
  m.tid = 4;
  m.meta = "key 3";
  EXPECT_EQ(one(m), R"({"name":"thread_name","ph":"M","pid":0,"tid":4,"args":{"name":"key 3"}})");
}

TEST(Timeline, Escaping) {
  std::string out;
  append_json_string(out, std::string("a\"b\\c\nd\te\x01\x7f") + "\xc3\xa9");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\te\\u0001\\u007f\xc3\xa9\"");
}

class TimelineFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/synk_timeline_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/trace.json";
  }
  void TearDown() override {
    stop();
    std::filesystem::remove_all(dir_);
  }
  std::string read() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // The events of a file in this form: "[\n" then objects separated by ",\n".
  static std::vector<std::string> events(const std::string& text) {
    std::vector<std::string> out;
    EXPECT_EQ(text.rfind("[\n", 0), 0u) << "the file must open with \"[\\n\"";
    std::size_t pos = 2;
    while (pos < text.size()) {
      const std::size_t next = text.find(",\n", pos);
      const std::size_t stop_at = next == std::string::npos ? text.size() : next;
      out.push_back(text.substr(pos, stop_at - pos));
      pos = next == std::string::npos ? text.size() : next + 2;
    }
    return out;
  }
  std::string dir_, path_;
};

int count(const std::vector<std::string>& ev, const std::string& what) {
  int n = 0;
  for (const std::string& e : ev) n += e.find(what) != std::string::npos ? 1 : 0;
  return n;
}

TEST_F(TimelineFile, ThreadsThenASecondProcess) {
  EXPECT_FALSE(on());
  begin("all_reduce", "running", 8);  // off: nothing, and no file yet
  EXPECT_FALSE(std::filesystem::exists(path_));

  ASSERT_TRUE(start_file(path_, 0, true));
  EXPECT_TRUE(on());
  EXPECT_TRUE(start_file(path_, 5, true));  // started already: nothing changes
  constexpr int kThreads = 4, kSpans = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      const std::string track = "key " + std::to_string(t);
      for (int k = 0; k < kSpans; ++k) {
        begin(track, "negotiate", 4);
        begin(track, "running", 4 * static_cast<std::uint64_t>(k));
        end(track);
        end(track);
        instant(track, "done", 4);
        if (k % 100 == 0) flush();
      }
    });
  }
  for (auto& th : threads) th.join();
  async_span("all_reduce", "all_reduce queued", clock_ns(), 64);
  stop();
  EXPECT_FALSE(on());
  begin("key 0", "running");  // off again: not written
  const std::string first = read();
  std::vector<std::string> ev = events(first);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev[0], R"({"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"rank 0"}})");
  for (const std::string& e : ev) {
    ASSERT_TRUE(e.size() > 2 && e.front() == '{' && e.back() == '}') << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_EQ(count(ev, "\"ph\":\"B\""), kThreads * kSpans * 2);
  EXPECT_EQ(count(ev, "\"ph\":\"E\""), kThreads * kSpans * 2);
  EXPECT_EQ(count(ev, "\"ph\":\"i\""), kThreads * kSpans);
  EXPECT_EQ(count(ev, "\"ph\":\"b\""), 1);
  EXPECT_EQ(count(ev, "\"ph\":\"e\""), 1);
  EXPECT_EQ(count(ev, "\"name\":\"thread_name\""), kThreads + 1);  // one per track
  // Per track (tid), B and E alternate into a proper nesting, in the order recorded.
  std::map<std::string, int> depth;
  for (const std::string& e : ev) {
    const std::size_t t = e.find("\"tid\":");
    const std::string tid = e.substr(t, e.find(',', t) - t);
    if (e.find("\"ph\":\"B\"") != std::string::npos) ++depth[tid];
    if (e.find("\"ph\":\"E\"") != std::string::npos) {
      ASSERT_GE(--depth[tid], 0) << e;
    }
  }
  for (const auto& [tid, d] : depth) EXPECT_EQ(d, 0) << tid;

  // A second process appends (no "[", its events after ",\n").
  ASSERT_TRUE(start_file(path_, 1, false));
  instant("key 9", "ready");
  flush();
  stop();
  const std::string both = read();
  ASSERT_EQ(both.rfind(first, 0), 0u);
  ev = events(both);
  EXPECT_EQ(count(ev, R"("args":{"name":"rank 1"})"), 1);
  EXPECT_EQ(count(ev, R"({"name":"ready","ph":"i","s":"t","pid":1,"tid":1,)"), 1);
  EXPECT_NE(both.back(), ',');  // "]" appended makes it JSON: no comma before it
}

TEST_F(TimelineFile, UnopenableFileLeavesItOff) {
  EXPECT_FALSE(start_file(dir_ + "/no/such/dir/trace.json", 0, true));
  EXPECT_FALSE(on());
  instant("key 1", "done");
  flush();  // nothing to do, no throw
}

}  // namespace
}  // namespace synk::detail::timeline
