// Parsing of the SYNK_* environment variables (see env.h).
#include "core/env.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "core/backend.h"
#include "core/contexts.h"
#include "synk/error.h"

namespace synk::detail {

namespace {

// One variable as set: its name, its value as given (for errors) and that value without the
// spaces and tabs around it, since a value pasted with a stray space is still meant.
struct Value {
  const char* var;
  std::string given;
  std::string text;  // trimmed; never empty
};

[[noreturn]] void bad(const Value& v, const std::string& expected) {
  throw Error(ErrorCode::InvalidArgument,
              std::string(v.var) + "='" + v.given + "' is not valid: expected " + expected);
}

// The one rule for every variable: surrounding spaces and tabs are trimmed, and a variable that
// is unset, empty or blank takes its default (nullopt).
std::optional<Value> read(const std::function<const char*(const char*)>& get, const char* var) {
  const char* raw = get(var);
  if (raw == nullptr) return std::nullopt;
  const std::string_view given(raw);
  const std::size_t first = given.find_first_not_of(" \t");
  if (first == std::string_view::npos) return std::nullopt;
  const std::size_t last = given.find_last_not_of(" \t");
  return Value{var, std::string(given), std::string(given.substr(first, last - first + 1))};
}

// strtoll and strtod skip any leading white space (newlines too) themselves: refuse what the
// trim left, so that nothing but spaces and tabs is forgiven.
bool starts_blank(const Value& v) {
  return std::isspace(static_cast<unsigned char>(v.text[0])) != 0;
}

long long parse_integer(const Value& v, long long min, long long max) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.text.c_str(), &end, 10);
  if (starts_blank(v) || errno != 0 || end == v.text.c_str() || *end != '\0' || n < min ||
      n > max) {
    bad(v, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return n;
}

double parse_seconds(const Value& v) {
  errno = 0;
  char* end = nullptr;
  const double t = std::strtod(v.text.c_str(), &end);
  // Past about 9.2e9 s the nanoseconds of a deadline overflow, and it passed at once.
  if (starts_blank(v) || errno != 0 || end == v.text.c_str() || *end != '\0' ||
      !std::isfinite(t) || t <= 0 || t > 1e9) {
    bad(v, "a positive number of seconds, at most 1e9");
  }
  return t;
}

// The value when it is one of `names`, else an error that says `expected`.
template <class Names>
std::string one_of(const Value& v, const Names& names, const std::string& expected) {
  for (std::string_view n : names) {
    if (v.text == n) return v.text;
  }
  bad(v, expected);
}

std::string one_of(const Value& v, std::initializer_list<std::string_view> names,
                   const char* expected) {
  return one_of<std::initializer_list<std::string_view>>(v, names, expected);
}

}  // namespace

Settings parse_settings(const std::function<const char*(const char*)>& get) {
  Settings s;
  const auto var = [&](const char* name) { return read(get, name); };
  if (const auto v = var("SYNK_BACKEND")) {
    s.backend = one_of(*v, kBackendChoices, backend_choices_text());
  }
  if (const auto v = var("SYNK_LOG")) {
    const std::string l =
        one_of(*v, {"error", "warn", "info", "debug"}, "error, warn, info or debug");
    s.log_level = l == "error" ? LogLevel::error
                  : l == "warn" ? LogLevel::warn
                  : l == "info" ? LogLevel::info
                                : LogLevel::debug;
  }
  if (const auto v = var("SYNK_TIMEOUT")) s.timeout_s = parse_seconds(*v);
  if (const auto v = var("SYNK_SIMULATE_NODES")) {
    s.simulate_nodes = static_cast<int>(parse_integer(*v, 1, 1 << 20));
  }
  if (const auto v = var("SYNK_CHECK_CALLS")) s.check_calls = parse_integer(*v, 0, 1) != 0;
  if (const auto v = var("SYNK_MPI_MAX_CHUNK")) {
    s.mpi_max_chunk = static_cast<std::size_t>(parse_integer(*v, 0, 2147483647LL));
  }
  if (const auto v = var("SYNK_MPI_THREADS")) {
    s.mpi_threads = one_of(*v, {"multiple", "serialized"}, "multiple or serialized");
  }
  if (const auto v = var("SYNK_SHM_SLOT_BYTES")) {
    // A multiple of 4096 keeps every slot page- and cache-line-aligned.
    const long long b = parse_integer(*v, 4096, 1LL << 30);
    if (b % 4096 != 0) bad(*v, "a multiple of 4096");
    s.shm_slot_bytes = static_cast<std::size_t>(b);
  }
  if (const auto v = var("SYNK_SHM_CMA_BYTES")) s.shm_cma_bytes = parse_integer(*v, 0, 1LL << 50);
  if (const auto v = var("SYNK_SHM_SPIN_US")) s.shm_spin_us = parse_integer(*v, 0, 60000000);
  if (const auto v = var("SYNK_SHM_STREAM")) {
    s.shm_stream = one_of(*v, {"auto", "always", "never"}, "auto, always or never");
  }
  if (const auto v = var("SYNK_SHM_SEGMENTS")) {
    s.shm_segments = one_of(*v, {"auto", "named"}, "auto or named");
  }
  if (const auto v = var("SYNK_SHM_ALGO")) s.shm_algo = v->text;
  if (const auto v = var("SYNK_CONTEXTS")) {
    parse_contexts(v->text);  // the syntax now; the device numbers once a backend knows them
    s.contexts = v->text;
  }
  if (const auto v = var("SYNK_GPU")) s.gpu = v->text;
  if (const auto v = var("SYNK_LOCAL_RANK")) {
    s.launcher_local_rank = static_cast<int>(parse_integer(*v, 0, 1 << 20));
  } else if (const auto w = var("OMPI_COMM_WORLD_LOCAL_RANK")) {
    // Under plain mpirun: the rank among all of the job's on this node. Without it, a
    // communicator split from the world counted its own ranks, and two halves of a node took
    // the same GPUs.
    s.launcher_local_rank = static_cast<int>(parse_integer(*w, 0, 1 << 20));
  }
  if (const auto v = var("SYNK_FUSION_BYTES")) {
    s.fusion_bytes = static_cast<std::size_t>(parse_integer(*v, 0, 1LL << 40));
  }
  if (const auto v = var("SYNK_STALL_WARN")) s.stall_warn_s = parse_seconds(*v);
  if (const auto v = var("SYNK_CYCLE_MS")) {
    s.cycle_ms = static_cast<int>(parse_integer(*v, 0, 10000));
  }
  if (const auto v = var("SYNK_TIMELINE")) s.timeline = v->text;
  return s;
}

const Settings& settings() {
  static const Settings cached = parse_settings([](const char* name) { return std::getenv(name); });
  return cached;
}

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "?";
}

}  // namespace synk::detail
