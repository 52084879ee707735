// The one rule for reading SYNK_* variables, and the core's settings (see env.h).
#include "core/env.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "core/backend.h"
#include "synk/error.h"

namespace synk::detail {

namespace env {

namespace {

// strtoll and strtod skip any leading white space (newlines too) themselves: refuse what the
// trim left, so that nothing but spaces and tabs is forgiven.
bool starts_blank(const Value& v) {
  return std::isspace(static_cast<unsigned char>(v.text[0])) != 0;
}

}  // namespace

void bad(const Value& v, const std::string& expected) {
  throw Error(ErrorCode::InvalidArgument,
              std::string(v.var) + "='" + v.given + "' is not valid: expected " + expected);
}

std::optional<Value> read(const EnvGetter& get, const char* var) {
  const char* raw = get(var);
  if (raw == nullptr) return std::nullopt;
  const std::string_view given(raw);
  const std::size_t first = given.find_first_not_of(" \t");
  if (first == std::string_view::npos) return std::nullopt;
  const std::size_t last = given.find_last_not_of(" \t");
  return Value{var, std::string(given), std::string(given.substr(first, last - first + 1))};
}

long long integer(const Value& v, long long min, long long max) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.text.c_str(), &end, 10);
  if (starts_blank(v) || errno != 0 || end == v.text.c_str() || *end != '\0' || n < min ||
      n > max) {
    bad(v, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return n;
}

double seconds(const Value& v) {
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

std::string one_of(const Value& v, std::span<const std::string_view> names,
                   const std::string& expected) {
  for (std::string_view n : names) {
    if (v.text == n) return v.text;
  }
  bad(v, expected);
}

std::string one_of(const Value& v, std::initializer_list<std::string_view> names,
                   const std::string& expected) {
  return one_of(v, std::span<const std::string_view>(names.begin(), names.size()), expected);
}

}  // namespace env

namespace {

// Names in any case, as NCCL_DEBUG=INFO is written: a setting that ended the job was too harsh.
void lower_case(std::string& text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

}  // namespace

Settings Settings::parse(const EnvGetter& get) {
  using namespace env;
  Settings s;
  const auto var = [&](const char* name) { return read(get, name); };
  if (auto v = var("SYNK_BACKEND")) {
    lower_case(v->text);
    s.backend = one_of(*v, kBackendChoices, backend_choices_text());
  }
  if (auto v = var("SYNK_LOG")) {
    lower_case(v->text);
    const std::string l =
        one_of(*v, {"error", "warn", "info", "debug"}, "error, warn, info or debug");
    s.log_level = l == "error" ? LogLevel::error
                  : l == "warn" ? LogLevel::warn
                  : l == "info" ? LogLevel::info
                                : LogLevel::debug;
  }
  if (const auto v = var("SYNK_TIMEOUT")) s.timeout_s = seconds(*v);
  if (const auto v = var("SYNK_SIMULATE_NODES")) {
    s.simulate_nodes = static_cast<int>(integer(*v, 1, 1 << 20));
  }
  if (const auto v = var("SYNK_CHECK_CALLS")) s.check_calls = integer(*v, 0, 1) != 0;
  if (const auto v = var("SYNK_MPI_THREADS")) {
    s.mpi_threads = one_of(*v, {"multiple", "serialized"}, "multiple or serialized");
  }
  if (const auto v = var("SYNK_LOCAL_RANK")) {
    s.launcher_local_rank = static_cast<int>(integer(*v, 0, 1 << 20));
  } else if (const auto w = var("OMPI_COMM_WORLD_LOCAL_RANK")) {
    // Under plain mpirun: the rank among all of the job's on this node. Without it, a
    // communicator split from the world counted its own ranks, and two halves of a node took
    // the same GPUs.
    s.launcher_local_rank = static_cast<int>(integer(*w, 0, 1 << 20));
  }
  if (const auto v = var("SYNK_STALL_WARN")) s.stall_warn_s = seconds(*v);
  if (const auto v = var("SYNK_TIMELINE")) s.timeline = v->text;
  return s;
}

const Settings& settings() { return env::cached<Settings>(); }

const Settings& settings_or_defaults() {
  try {
    return settings();
  } catch (const Error&) {
    static const Settings defaults;
    return defaults;
  }
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
