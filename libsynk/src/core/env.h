// SYNK_* environment variables: the one rule for reading them (env:: below), and the core's own
// settings. Each subsystem declares its settings beside it and parses them with env:: where they
// are read (backends/mpi/mpi_settings.h, backends/shm/shm_settings.h, device/device_settings.h,
// kv/kv_settings.h), as NCCL declares its NCCL_PARAMs; docs/environment.md lists them all.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace synk::detail {

// Returns a variable's value, or nullptr where it is unset: std::getenv, or a test's map.
using EnvGetter = std::function<const char*(const char*)>;

namespace env {

// One variable as set: its name, its value as given (for errors) and that value without the
// spaces and tabs around it, since a value pasted with a stray space is still meant.
struct Value {
  const char* var;
  std::string given;
  std::string text;  // trimmed; never empty
};

// The one rule for every variable: surrounding spaces and tabs are trimmed, and a variable that
// is unset, empty or blank takes its default (nullopt).
std::optional<Value> read(const EnvGetter& get, const char* var);
// Throws synk::Error(InvalidArgument): "VAR='given' is not valid: expected <expected>".
[[noreturn]] void bad(const Value& v, const std::string& expected);
long long integer(const Value& v, long long min, long long max);
double seconds(const Value& v);  // positive, at most 1e9
// The value when it is one of `names`, else an error that says `expected`.
std::string one_of(const Value& v, std::span<const std::string_view> names,
                   const std::string& expected);
std::string one_of(const Value& v, std::initializer_list<std::string_view> names,
                   const std::string& expected);

// Parses a subsystem's settings from the process's environment on first use, and keeps them.
template <class S>
const S& cached() {
  static const S s = S::parse([](const char* name) -> const char* { return std::getenv(name); });
  return s;
}

}  // namespace env

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

// The core's settings: the communicator, its checks and waits, MPI, logging, the launcher's
// local rank.
struct Settings {
  std::string backend = "auto";    // SYNK_BACKEND: auto|mpi|shm|nccl
  LogLevel log_level = LogLevel::warn;  // SYNK_LOG: error|warn|info|debug
  double timeout_s = 300.0;        // SYNK_TIMEOUT: deadline of every blocking wait, seconds
  int simulate_nodes = 1;          // SYNK_SIMULATE_NODES: split each real node into k fake ones
  bool check_calls = false;        // SYNK_CHECK_CALLS: ranks compare every call before running it
  // SYNK_MPI_THREADS: the thread level synk asks for when it initializes MPI: multiple (calls
  // of the mpi and hier backends can run on the progress thread) or serialized (they run at
  // issue; Open MPI's small messages are a little faster without threads: docs/measurements.md,
  // "Non-blocking calls on the mpi backend").
  std::string mpi_threads = "multiple";
  int launcher_local_rank = -1;    // SYNK_LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK (-1: neither)
  double stall_warn_s = 60.0;  // SYNK_STALL_WARN: seconds before a stalled call or key is reported
  std::string timeline;  // SYNK_TIMELINE: the Chrome trace file to write (empty: none)

  // Throws synk::Error(InvalidArgument) naming the variable and its value (as given) when one
  // is malformed.
  static Settings parse(const EnvGetter& get);
};

// The process's core settings, read from the environment on first use and cached.
const Settings& settings();
// settings(), or the defaults where a variable is malformed: for work that must go on before or
// beside a communicator's start, which reports the variable (on every rank).
const Settings& settings_or_defaults();

const char* to_string(LogLevel level) noexcept;

}  // namespace synk::detail
