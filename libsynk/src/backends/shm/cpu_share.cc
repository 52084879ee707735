#include "backends/shm/cpu_share.h"

#include <fstream>
#include <sstream>
#include <vector>

namespace synk::shm {

namespace {

// Kuhn's augmenting path from rank r: a free CPU of its mask, or one whose owner can move on.
bool augment(std::span<const cpu_set_t> masks, int r, std::vector<int>& owner,
             std::vector<char>& seen) {
  const cpu_set_t& m = masks[static_cast<std::size_t>(r)];
  for (int c = 0; c < CPU_SETSIZE; ++c) {  // a free CPU first: the usual case needs no search
    if (CPU_ISSET(c, &m) && owner[static_cast<std::size_t>(c)] < 0) {
      owner[static_cast<std::size_t>(c)] = r;
      return true;
    }
  }
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    const auto i = static_cast<std::size_t>(c);
    if (!CPU_ISSET(c, &m) || seen[i]) continue;
    seen[i] = 1;
    if (augment(masks, owner[i], owner, seen)) {
      owner[i] = r;
      return true;
    }
  }
  return false;
}

double tighter(double a, double b) {
  if (a <= 0) return b;
  if (b <= 0) return a;
  return a < b ? a : b;
}

// The tightest of limit_in(dir) over a group's directory and its ancestors'.
template <class LimitIn>
double tightest_up(const std::string& base, const std::string& path, LimitIn&& limit_in) {
  double limit = 0;
  for_each_cgroup_up(base, path,
                     [&](const std::string& dir) { limit = tighter(limit, limit_in(dir)); });
  return limit;
}

}  // namespace

std::string read_file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return in ? s.str() : std::string();
}

std::vector<CgroupLine> cgroup_lines(const std::string& self_cgroup) {
  std::vector<CgroupLine> out;
  std::istringstream lines(self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t colon = line.find(':'), second = line.find(':', colon + 1);
    if (colon == std::string::npos || second == std::string::npos) continue;
    CgroupLine l;
    l.v2 = line.rfind("0::", 0) == 0;
    l.controllers.assign(1, ',');
    l.controllers.append(line, colon + 1, second - colon - 1).push_back(',');
    l.path = line.substr(second + 1);
    out.push_back(std::move(l));
  }
  return out;
}

void for_each_cgroup_up(const std::string& base, std::string path,
                        const std::function<void(const std::string& dir)>& visit) {
  for (;;) {
    visit(base + path);
    if (path.empty() || path == "/") return;
    path.resize(path.rfind('/'));
  }
}

bool each_rank_has_a_cpu(std::span<const cpu_set_t> masks) {
  if (masks.size() > static_cast<std::size_t>(CPU_SETSIZE)) return false;
  // The usual case, every rank allowed the same CPUs (nobody bound them), needs no search.
  bool same = true;
  for (const cpu_set_t& m : masks) same = same && CPU_EQUAL(&m, &masks[0]);
  if (same && !masks.empty()) return static_cast<std::size_t>(CPU_COUNT(&masks[0])) >= masks.size();
  std::vector<int> owner(CPU_SETSIZE, -1);
  std::vector<char> seen(CPU_SETSIZE);
  for (std::size_t r = 0; r < masks.size(); ++r) {
    seen.assign(seen.size(), 0);
    if (!augment(masks, static_cast<int>(r), owner, seen)) return false;
  }
  return true;
}

double cpu_max_limit(const std::string& text) {
  std::istringstream in(text);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  try {
    const double q = std::stod(quota);
    return q > 0 ? q / period : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

double cgroup_cpu_limit(const std::string& self_cgroup, const std::string& root) {
  double limit = 0;
  for (const CgroupLine& l : cgroup_lines(self_cgroup)) {
    const std::string& path = l.path;
    if (l.v2) {
      limit = tighter(limit, tightest_up(root, path, [](const std::string& dir) {
                        return cpu_max_limit(read_file_text(dir + "/cpu.max"));
                      }));
    } else if (l.controllers.find(",cpu,") != std::string::npos) {
      // v1, where the hierarchy is mounted under either name; in a container the mount's top
      // is the container's own group.
      const auto quota_in = [](const std::string& dir) {
        const std::string quota = read_file_text(dir + "/cpu.cfs_quota_us");
        if (quota.empty()) return 0.0;
        return cpu_max_limit(quota.substr(0, quota.find('\n')) + " " +
                             read_file_text(dir + "/cpu.cfs_period_us"));
      };
      for (const char* mount : {"/cpu", "/cpu,cpuacct"})
        limit = tighter(limit, tightest_up(root + mount, path, quota_in));
    }
  }
  return limit;
}

double cgroup_cpu_limit() {
  return cgroup_cpu_limit(read_file_text("/proc/self/cgroup"), "/sys/fs/cgroup");
}

}  // namespace synk::shm
