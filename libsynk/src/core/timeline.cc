// SYNK_TIMELINE: events buffered per process under one mutex, written with write(2) in pieces
// of whole events (see timeline.h for the file's form and who writes where).
#include "core/timeline.h"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/env.h"
#include "core/logging.h"
#include "core/write_all.h"

namespace synk::detail::timeline {

std::atomic<bool> g_on{false};

namespace {

constexpr std::size_t kFlushBytes = std::size_t{4} << 20;     // write once the buffer has this
constexpr std::uint64_t kFlushAfterNs = 1'000'000'000;        // or on a record this long after

struct State {
  std::mutex mu;        // everything below but fd
  std::mutex write_mu;  // fd, and one write at a time (taken after mu, or alone)
  int fd = -1;
  std::string path;
  int pid = 0;
  std::string buf;  // whole events, each ",\n{...}"
  std::unordered_map<std::string, int> tids;
  int next_tid = 1;
  std::uint64_t next_id = 1;
  std::int64_t offset_ns = 0;  // added to clock_ns(): rank 0's clock where nodes differ
  std::uint64_t last_write_ns = 0;
  bool write_through = false;  // after the exit flush: records are written at once
  bool at_exit_registered = false;
};

// Never destroyed: a static destructor that runs after the exit flush may still record.
State& state() {
  static State* s = new State;
  return *s;
}

std::atomic<bool> g_write_failed{false};

constexpr std::size_t kPieceBytes = std::size_t{64} << 10;

// Writes `out` (whole events, each ",\n{...}") in pieces of at most kPieceBytes that end on an
// event: a process killed in a write cuts at most the piece it was in (a 4 MiB write was cut in
// the middle of an event, one kill in sixteen), and the ranks that append to the same file
// interleave whole events only.
bool write_events(int fd, const std::string& out) {
  std::size_t at = 0;
  while (at < out.size()) {
    std::size_t end = out.size();
    if (end - at > kPieceBytes) {
      const std::size_t cut = out.rfind(",\n", at + kPieceBytes);
      end = cut != std::string::npos && cut > at ? cut : out.find(",\n", at + 1);
      if (end == std::string::npos) end = out.size();
    }
    if (!write_all(fd, out.data() + at, end - at)) return false;
    at = end;
  }
  return true;
}

// Writes s.buf. Called with lk holding s.mu, which it releases: recording goes on meanwhile.
// The write lock is taken before s.mu is let go, so the buffers reach the file in the order
// they were taken, and each track's events in the order they were recorded (a B after its E
// had left a tid's spans unbalanced in file order, one test run in ten).
void write_out(State& s, std::unique_lock<std::mutex>& lk) {
  if (s.buf.empty()) return;
  std::string out;
  out.swap(s.buf);
  std::lock_guard w(s.write_mu);
  lk.unlock();
  if (s.fd < 0) return;
  if (!write_events(s.fd, out)) {
    const int err = errno;
    g_on.store(false, std::memory_order_relaxed);
    if (!g_write_failed.exchange(true)) {
      try {
        SYNK_LOG_AT(warn, "SYNK_TIMELINE: cannot write " << s.path << ": " << std::strerror(err)
                                                         << "; the timeline stops here");
      } catch (...) {
      }
    }
  }
}

void flush_at_exit() noexcept {
  State& s = state();
  std::unique_lock lk(s.mu);
  s.write_through = true;
  write_out(s, lk);
}

std::uint64_t shifted(const State& s, std::uint64_t raw) {
  const std::int64_t t = static_cast<std::int64_t>(raw) + s.offset_ns;
  return t < 0 ? 0 : static_cast<std::uint64_t>(t);
}

void append_sep_event(std::string& out, const Event& e) {
  out += ",\n";
  append_event(out, e);
}

// The track's tid, named with a thread_name event the first time. Under s.mu.
int tid_of(State& s, const std::string& track) {
  auto it = s.tids.find(track);
  if (it != s.tids.end()) return it->second;
  const int tid = s.next_tid++;
  s.tids.emplace(track, tid);
  Event m;
  m.ph = 'M';
  m.name = "thread_name";
  m.pid = s.pid;
  m.tid = tid;
  m.meta = track;
  append_sep_event(s.buf, m);
  return tid;
}

// Appends events made by `fill` (which gets the state, the track's tid and now, shifted) and
// writes the buffer when it is due. Never throws: an event that cannot be made is dropped.
template <class Fill>
void record(const std::string& track, Fill&& fill) noexcept {
  const std::uint64_t now = clock_ns();
  State& s = state();
  std::unique_lock lk(s.mu);
  if (!on()) return;  // stopped since the caller looked
  try {
    fill(s, tid_of(s, track), shifted(s, now));
  } catch (...) {
    return;
  }
  // (now may be older than last_write_ns: another thread wrote after this one read the clock.)
  if (s.write_through || s.buf.size() >= kFlushBytes ||
      (now > s.last_write_ns && now - s.last_write_ns >= kFlushAfterNs)) {
    s.last_write_ns = now;
    write_out(s, lk);
  }
}

void append_u64(std::string& out, std::uint64_t v) {
  char text[24];
  const int n = std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(v));
  out.append(text, static_cast<std::size_t>(n));
}

}  // namespace

std::uint64_t clock_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", u);
      out += esc;
    } else {
      out += c;
    }
  }
  out += '"';
}

void append_event(std::string& out, const Event& e) {
  out += '{';
  if (e.ph != 'E') {
    out += "\"name\":";
    append_json_string(out, e.name);
    out += ',';
  }
  if (e.ph == 'b' || e.ph == 'e') out += "\"cat\":\"synk\",";
  out += "\"ph\":\"";
  out += e.ph;
  out += '"';
  if (e.ph == 'i') out += ",\"s\":\"t\"";
  if (e.ph == 'b' || e.ph == 'e') {
    out += ",\"id\":";
    append_u64(out, e.id);
  }
  out += ",\"pid\":";
  out += std::to_string(e.pid);
  out += ",\"tid\":";
  out += std::to_string(e.tid);
  if (e.ph == 'M') {
    out += ",\"args\":{\"name\":";
    append_json_string(out, e.meta);
    out += "}}";
    return;
  }
  // Microseconds with the nanoseconds as three decimals: shm calls take well under 1 us.
  char ts[40];
  std::snprintf(ts, sizeof ts, ",\"ts\":%llu.%03u", static_cast<unsigned long long>(e.ts_ns / 1000),
                static_cast<unsigned>(e.ts_ns % 1000));
  out += ts;
  if (e.ph == 'B' || e.ph == 'i' || e.ph == 'b') {
    out += ",\"args\":{\"bytes\":";
    append_u64(out, e.bytes);
    out += '}';
  }
  out += '}';
}

bool start_file(const std::string& path, int pid, bool create) {
  State& s = state();
  std::lock_guard a(s.mu);
  std::lock_guard b(s.write_mu);
  if (s.fd >= 0) return true;
  const int flags = O_WRONLY | O_APPEND | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0);
  const int fd = ::open(path.c_str(), flags, 0644);
  const int open_err = errno;
  std::string head = create ? "[\n" : ",\n";
  Event m;
  m.ph = 'M';
  m.name = "process_name";
  m.pid = pid;
  const std::string rank_name = "rank " + std::to_string(pid);
  m.meta = rank_name;
  append_event(head, m);
  if (fd < 0 || !write_all(fd, head.data(), head.size())) {
    const int err = fd < 0 ? open_err : errno;
    if (fd >= 0) ::close(fd);
    SYNK_LOG_AT(warn, "SYNK_TIMELINE: cannot " << (fd < 0 ? "open " : "write ") << path << ": "
                                               << std::strerror(err) << "; no timeline");
    return false;
  }
  s.fd = fd;
  s.path = path;
  s.pid = pid;
  s.buf.clear();
  s.tids.clear();
  s.next_tid = 1;
  s.last_write_ns = clock_ns();
  s.write_through = false;
  g_write_failed.store(false);
  if (!s.at_exit_registered) {
    s.at_exit_registered = true;
    std::atexit(flush_at_exit);
  }
  g_on.store(true, std::memory_order_relaxed);
  return true;
}

void stop() {
  State& s = state();
  std::lock_guard a(s.mu);
  std::lock_guard b(s.write_mu);
  g_on.store(false, std::memory_order_relaxed);
  if (s.fd >= 0) {
    write_events(s.fd, s.buf);
    ::close(s.fd);
    s.fd = -1;
  }
  s.buf.clear();
  s.tids.clear();
  s.offset_ns = 0;
}

void start(const CommContext& ctx) {
  std::string file;
  try {
    file = settings().timeline;
  } catch (...) {
    return;  // a malformed variable is reported by the Communicator's own settings()
  }
  if (file.empty()) return;
  static std::mutex start_mu;
  static bool started = false;
  std::lock_guard g(start_mu);
  if (started) return;
  started = true;
  try {
    int world_size = 0, world_rank = 0;
    if (MPI_Comm_size(MPI_COMM_WORLD, &world_size) != MPI_SUCCESS ||
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank) != MPI_SUCCESS) {
      return;
    }
    const std::string own_file = file + "." + std::to_string(world_rank);
    if (ctx.size != world_size) {  // not every rank is here to agree on one file
      SYNK_LOG_AT(info, "SYNK_TIMELINE: the first communicator is not all of MPI_COMM_WORLD; "
                        "this rank writes " << own_file);
      start_file(own_file, world_rank, true);
      return;
    }
    // One file only where every rank can append to it: the same node.
    MPI_Comm node = MPI_COMM_NULL;
    int node_size = 0;
    if (MPI_Comm_split_type(ctx.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS) {
      return;
    }
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    if (node_size != ctx.size) {
      // A file per process, its times on the clock of the communicator's rank 0 (the nodes'
      // steady clocks have different origins), taken as everyone leaves a barrier.
      long long t0 = 0;
      MPI_Barrier(ctx.comm);
      if (ctx.rank == 0) t0 = static_cast<long long>(clock_ns());
      MPI_Bcast(&t0, 1, MPI_LONG_LONG, 0, ctx.comm);
      {
        State& s = state();
        std::lock_guard lk(s.mu);
        s.offset_ns = ctx.rank == 0 ? 0 : t0 - static_cast<long long>(clock_ns());
      }
      SYNK_LOG_AT(info, "SYNK_TIMELINE: ranks on several nodes; this rank writes " << own_file);
      start_file(own_file, world_rank, true);
      return;
    }
    // Rank 0 creates the file and writes "[" before anyone appends; the broadcast says whether
    // it could (and orders the others' opens after it).
    int ok = ctx.rank == 0 ? static_cast<int>(start_file(file, world_rank, true)) : 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, ctx.comm);
    if (ctx.rank != 0) {
      if (ok) {
        start_file(file, world_rank, false);
      } else {
        SYNK_LOG_AT(info, "SYNK_TIMELINE: rank 0 could not create " << file << "; no timeline");
      }
    }
  } catch (...) {
    g_on.store(false, std::memory_order_relaxed);
  }
}

namespace {

// A 'B', 'E' or 'i' event on `track` now.
void record_point(const std::string& track, char ph, const char* name, std::uint64_t bytes) {
  record(track, [&](State& s, int tid, std::uint64_t ts) {
    Event e;
    e.ph = ph;
    if (name != nullptr) e.name = name;
    e.pid = s.pid;
    e.tid = tid;
    e.ts_ns = ts;
    e.bytes = bytes;
    append_sep_event(s.buf, e);
  });
}

}  // namespace

void begin(const std::string& track, const char* phase, std::uint64_t bytes) {
  if (on()) record_point(track, 'B', phase, bytes);
}

void end(const std::string& track) {
  if (on()) record_point(track, 'E', nullptr, 0);
}

void instant(const std::string& track, const char* what, std::uint64_t bytes) {
  if (on()) record_point(track, 'i', what, bytes);
}

void async_span(const std::string& track, const std::string& name, std::uint64_t begin_ns,
                std::uint64_t bytes) {
  if (!on()) return;
  record(track, [&](State& s, int tid, std::uint64_t ts) {
    Event e;
    e.ph = 'b';
    e.name = name;
    e.pid = s.pid;
    e.tid = tid;
    // Perfetto pairs "id"s across the whole trace: the rank in the high bits keeps them apart.
    e.id = (static_cast<std::uint64_t>(s.pid) << 32) | s.next_id++;
    e.ts_ns = shifted(s, begin_ns);
    e.bytes = bytes;
    append_sep_event(s.buf, e);
    e.ph = 'e';
    e.ts_ns = ts;
    append_sep_event(s.buf, e);
  });
}

void flush() {
  if (!on()) return;
  State& s = state();
  std::unique_lock lk(s.mu);
  s.last_write_ns = clock_ns();
  write_out(s, lk);
}

}  // namespace synk::detail::timeline
