// SYNK_TIMELINE=FILE: a Chrome trace (Trace Event Format, JSON array form) of what every rank
// does: per rank (pid = world rank, named "rank N") a row per track (tid, named after it: a
// collective, a KeyValue key), with spans ("B"/"E": queued, negotiate, fused, running...) and
// point events ("i": done, ready...), bytes in "args". Opens in ui.perfetto.dev and
// chrome://tracing.
//
// The file: "[\n" and a first event, then ",\n{...}" per event, so it is JSON once "]" is appended,
// and it needs no "]" to load (the trace viewers add it: the format allows a trace that ends
// without one, for programs that cannot finish it). Every rank of a job on one node appends to the
// same FILE (O_APPEND, whole events per write(2), 64 KiB of them at most but for one larger event,
// which on a local file do not interleave); the first rank of the communicator that started it
// creates FILE and writes "[" and its first event before any other rank opens it. Where the first
// communicator is not all of MPI_COMM_WORLD, or the job spans several nodes, each process writes
// FILE.<world rank> instead.
//
// Events are buffered in memory and written in large writes: when the engine calls flush() (once
// per cycle), when the buffer passes 4 MiB, on a record a second or more after the last write,
// and at exit. Off (the default) every entry point is one relaxed load of a global bool.
// Recording never throws: a file that cannot be opened or written is one warning, and the
// timeline turns off.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/backend.h"

namespace synk::detail::timeline {

// Set once the trace has started; cleared if writing fails.
extern std::atomic<bool> g_on;

// Whether SYNK_TIMELINE is set and the trace started; one relaxed atomic load, inline.
inline bool on() noexcept { return g_on.load(std::memory_order_relaxed); }

// Starts the trace once per process (later calls do nothing): called from every Communicator's
// bootstrap with that communicator's context. Collective over ctx.comm when that communicator
// has every rank of MPI_COMM_WORLD (SYNK_TIMELINE must then be set on every rank, as mpirun and
// synkrun pass it); local otherwise. Does nothing when SYNK_TIMELINE is unset; never throws.
void start(const CommContext& ctx);

// A span on a track of this rank: `track` names the row ("key 3", "all_reduce", ...), `phase` the
// span's name ("queued", "negotiate", "fused", "running", ...). begin/end pairs nest per track
// (end closes the innermost open span of its track), whichever thread records them.
void begin(const std::string& track, const char* phase, std::uint64_t bytes = 0);
void end(const std::string& track);
// A point event on a track (e.g. "done", "ready").
void instant(const std::string& track, const char* what, std::uint64_t bytes = 0);
// A span from begin_ns (a clock_ns() value) to now that may overlap others of its name, as the
// waits of calls queued one behind another do (B/E spans on one row must nest): an async pair
// ("b"/"e", an id of its own) named `name`, shown under the rank (chrome://tracing: under the
// track's row), overlapping ones stacked.
void async_span(const std::string& track, const std::string& name, std::uint64_t begin_ns,
                std::uint64_t bytes = 0);
// Writes what is buffered (the engine calls it once per cycle; also at exit).
void flush();

// The clock of the timestamps: steady, in nanoseconds (written as microseconds, "ts").
std::uint64_t clock_ns() noexcept;

// For tests and start(): writes the trace to `path` as process `pid`, creating (truncating) it
// and writing its opening "[" when `create`, else appending to it; turns the timeline on.
// Returns false (after one warning) when the file cannot be opened. A no-op returning true
// once a trace has started.
bool start_file(const std::string& path, int pid, bool create);
// For tests: flushes, closes the file and turns the timeline off; a later start_file starts over.
void stop();

// One event as written (Trace Event Format). Fields a phase does not use are left out.
struct Event {
  char ph = 'i';             // 'B', 'E', 'i', 'b', 'e', 'M'
  std::string_view name;     // the span's or event's name; for 'M': the metadata's kind
  int pid = 0;
  int tid = 0;
  std::uint64_t ts_ns = 0;   // not written for 'M'
  std::uint64_t bytes = 0;   // args.bytes on 'B', 'i' and 'b'
  std::uint64_t id = 0;      // 'b', 'e': the async span's id
  std::string_view meta;     // 'M': args.name (process_name, thread_name)
};
// Appends e as one JSON object ("{...}", no separator, no newline).
void append_event(std::string& out, const Event& e);
// Appends s as a JSON string literal, quotes included (", \ and control characters escaped;
// bytes >= 0x80 are copied, so UTF-8 stays UTF-8).
void append_json_string(std::string& out, std::string_view s);

}  // namespace synk::detail::timeline
