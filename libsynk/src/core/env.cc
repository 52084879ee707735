// Parsing of the SYNK_* environment variables (see env.h).
#include "core/env.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "core/contexts.h"
#include "synk/error.h"

namespace synk::detail {

namespace {

[[noreturn]] void bad(const char* var, const char* value, const std::string& expected) {
  throw Error(ErrorCode::InvalidArgument,
              std::string(var) + "='" + value + "' is not valid: expected " + expected);
}

long long parse_integer(const char* var, const char* value, long long min, long long max) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < min || v > max) {
    bad(var, value, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return v;
}

}  // namespace

Settings parse_settings(const std::function<const char*(const char*)>& get) {
  Settings s;
  if (const char* v = get("SYNK_BACKEND"); v && *v) {
    const std::string_view b(v);
    if (b != "auto" && b != "mpi" && b != "shm" && b != "nccl") bad("SYNK_BACKEND", v, "auto, mpi, shm or nccl");
    s.backend = b;
  }
  if (const char* v = get("SYNK_LOG"); v && *v) {
    const std::string_view l(v);
    if (l == "error") s.log_level = LogLevel::error;
    else if (l == "warn") s.log_level = LogLevel::warn;
    else if (l == "info") s.log_level = LogLevel::info;
    else if (l == "debug") s.log_level = LogLevel::debug;
    else bad("SYNK_LOG", v, "error, warn, info or debug");
  }
  if (const char* v = get("SYNK_TIMEOUT"); v && *v) {
    errno = 0;
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    // Past about 9.2e9 s the nanoseconds of a deadline overflow, and it passed at once.
    if (errno != 0 || end == v || *end != '\0' || !std::isfinite(t) || t <= 0 || t > 1e9) {
      bad("SYNK_TIMEOUT", v, "a positive number of seconds, at most 1e9");
    }
    s.timeout_s = t;
  }
  if (const char* v = get("SYNK_SIMULATE_NODES"); v && *v) {
    s.simulate_nodes = static_cast<int>(parse_integer("SYNK_SIMULATE_NODES", v, 1, 1 << 20));
  }
  if (const char* v = get("SYNK_CHECK_CALLS"); v && *v) {
    s.check_calls = parse_integer("SYNK_CHECK_CALLS", v, 0, 1) != 0;
  }
  if (const char* v = get("SYNK_MPI_MAX_CHUNK"); v && *v) {
    s.mpi_max_chunk =
        static_cast<std::size_t>(parse_integer("SYNK_MPI_MAX_CHUNK", v, 0, 2147483647LL));
  }
  if (const char* v = get("SYNK_SHM_SLOT_BYTES"); v && *v) {
    // A multiple of 4096 keeps every slot page- and cache-line-aligned.
    const long long b = parse_integer("SYNK_SHM_SLOT_BYTES", v, 4096, 1LL << 30);
    if (b % 4096 != 0) bad("SYNK_SHM_SLOT_BYTES", v, "a multiple of 4096");
    s.shm_slot_bytes = static_cast<std::size_t>(b);
  }
  if (const char* v = get("SYNK_SHM_CMA_BYTES"); v && *v) {
    s.shm_cma_bytes = parse_integer("SYNK_SHM_CMA_BYTES", v, 0, 1LL << 50);
  }
  if (const char* v = get("SYNK_SHM_SPIN_US"); v && *v) {
    s.shm_spin_us = parse_integer("SYNK_SHM_SPIN_US", v, 0, 60000000);
  }
  if (const char* v = get("SYNK_SHM_STREAM"); v && *v) {
    const std::string_view m(v);
    if (m != "auto" && m != "always" && m != "never")
      bad("SYNK_SHM_STREAM", v, "auto, always or never");
    s.shm_stream = m;
  }
  if (const char* v = get("SYNK_SHM_SEGMENTS"); v && *v) {
    const std::string_view m(v);
    if (m != "auto" && m != "named") bad("SYNK_SHM_SEGMENTS", v, "auto or named");
    s.shm_segments = m;
  }
  if (const char* v = get("SYNK_CONTEXTS"); v && *v) {
    parse_contexts(v);  // the syntax now; the device numbers once a backend knows the devices
    s.contexts = v;
  }
  if (const char* v = get("SYNK_GPU"); v && *v) s.gpu = v;
  if (const char* v = get("SYNK_LOCAL_RANK"); v && *v) {
    s.launcher_local_rank = static_cast<int>(parse_integer("SYNK_LOCAL_RANK", v, 0, 1 << 20));
  } else if (const char* w = get("OMPI_COMM_WORLD_LOCAL_RANK"); w && *w) {
    // Under plain mpirun: the rank among all of the job's on this node. Without it, a
    // communicator split from the world counted its own ranks, and two halves of a node took
    // the same GPUs.
    s.launcher_local_rank =
        static_cast<int>(parse_integer("OMPI_COMM_WORLD_LOCAL_RANK", w, 0, 1 << 20));
  }
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
