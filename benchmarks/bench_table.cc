// See bench_table.h. Column widths follow nccl-tests: right-aligned, the header behind '#'.
#include "bench_table.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace synk::bench {

namespace {

[[gnu::format(printf, 1, 2)]] std::string printf_string(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

}  // namespace

// One line of column names; '#' takes the first column of the size field so it stays a comment.
std::string table_header(const std::string& baseline) {
  return printf_string("#%12s %12s %9s %6s %5s %8s %10s %12s %12s %7s %10s %8s\n", "size(B)",
                       "count", "type", "redop", "root", "backend", "time(us)", "algbw(GB/s)",
                       "busbw(GB/s)", "#wrong", (baseline + "(us)").c_str(), "speedup");
}

std::string format_row(const Row& r) {
  const std::string wrong = r.wrong ? std::to_string(*r.wrong) : "N/A";
  const std::string base = r.base_time_us ? printf_string("%.2f", *r.base_time_us) : "-";
  const std::string speedup = r.speedup ? printf_string("%.2f", *r.speedup) : "-";
  return printf_string("%13zu %12zu %9s %6s %5d %8s %10.2f %12.3f %12.3f %7s %10s %8s\n", r.bytes,
                       r.count, to_string(r.dtype), r.op ? to_string(*r.op) : "none", r.root,
                       r.backend.c_str(), r.time_us, r.algbw, r.busbw, wrong.c_str(), base.c_str(),
                       speedup.c_str());
}

std::string summary_line(const std::vector<Row>& rows, Coll coll, const std::string& backend) {
  double busbw = 0, base_busbw = 0, log_speedup = 0;
  int n = 0, n_base = 0;
  std::string base_name;
  for (const Row& r : rows) {
    if (r.coll != coll || r.backend != backend) continue;
    busbw += r.busbw;
    ++n;
    if (r.base_time_us && r.speedup) {
      // The same bytes in base_time_us. (busbw / speedup was not it: the speedup is the median
      // of the rounds' ratios, not the ratio of the two columns.)
      base_busbw += r.busbw * r.time_us / *r.base_time_us;
      log_speedup += std::log(*r.speedup);
      ++n_base;
      base_name = r.baseline == "nccl" ? "raw NCCL" : "MPI";
    }
  }
  if (n == 0) return {};
  std::string line =
      printf_string("# %s (%s): avg busbw %.3f GB/s", to_string(coll), backend.c_str(), busbw / n);
  if (n_base > 0) {
    line += printf_string(", %s %.3f GB/s over %d sizes, geomean speedup %.2f", base_name.c_str(),
                          base_busbw / n_base, n_base, std::exp(log_speedup / n_base));
  }
  return line + "\n";
}

void write_json(const std::string& file, const std::vector<Row>& rows) {
  nlohmann::json list = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json o;
    o["coll"] = to_string(r.coll);
    o["bytes"] = r.bytes;
    o["count"] = r.count;
    o["dtype"] = to_string(r.dtype);
    o["op"] = r.op ? nlohmann::json(to_string(*r.op)) : nlohmann::json(nullptr);
    o["root"] = r.root >= 0 ? nlohmann::json(r.root) : nlohmann::json(nullptr);
    o["backend"] = r.backend;
    o["time_us"] = r.time_us;
    o["algbw"] = r.algbw;
    o["busbw"] = r.busbw;
    o["wrong"] = r.wrong ? nlohmann::json(*r.wrong) : nlohmann::json(nullptr);
    o[r.baseline + "_time_us"] =
        r.base_time_us ? nlohmann::json(*r.base_time_us) : nlohmann::json(nullptr);
    o["speedup"] = r.speedup ? nlohmann::json(*r.speedup) : nlohmann::json(nullptr);
    o["ranks"] = r.ranks;
    o["in_place"] = r.in_place;
    o["nonblocking"] = r.nonblocking;
    o["fresh"] = r.fresh;
    o["node_buffers"] = r.node_buffers;
    list.push_back(std::move(o));
  }
  std::ofstream out(file, std::ios::trunc);
  if (out) out << list.dump(2) << "\n";
  out.close();
  if (!out) {
    throw std::runtime_error("cannot write --json file '" + file + "': " + std::strerror(errno));
  }
}

}  // namespace synk::bench
