// See hosts.h.
#include "hosts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <sstream>

namespace synk::launch {
namespace {

std::string without_user(const std::string& name) {
  const auto at = name.rfind('@');
  return at == std::string::npos ? name : name.substr(at + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string short_name(const std::string& s) { return s.substr(0, s.find('.')); }

bool is_interface_address(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (const ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const int family = a->ifa_addr->sa_family;
    const void* addr = nullptr;
    if (family == AF_INET) addr = &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr;
    if (family == AF_INET6) addr = &reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr;
    if (addr != nullptr && inet_ntop(family, addr, text, sizeof text) != nullptr) {
      found = name == text;
    }
  }
  freeifaddrs(list);
  return found;
}

// A hostfile line's words after the host as "key=value" settings, also written "key = value".
std::vector<std::string> hostfile_settings(const std::string& rest) {
  std::string joined;  // the words with the blanks around "=" removed
  std::istringstream words(rest);
  for (std::string w; words >> w;) {
    const bool glue = w.front() == '=' || (!joined.empty() && joined.back() == '=');
    if (!joined.empty() && !glue) joined += ' ';
    joined += w;
  }
  std::istringstream pairs(joined);
  std::vector<std::string> out;
  for (std::string p; pairs >> p;) out.push_back(p);
  return out;
}

// Open MPI takes count= and cpu= as slots=.
bool names_slots(const std::string& key) {
  return key == "slots" || key == "count" || key == "cpu";
}

// "slots=4" among a hostfile line's settings.
std::string hostfile_slots(const std::vector<std::string>& settings,
                           std::optional<long long>& slots) {
  bool given = false;
  for (const std::string& p : settings) {
    const auto eq = p.find('=');
    const std::string key = lower(p.substr(0, eq));
    if (!names_slots(key)) continue;
    // mpirun refuses the line ("multiple definitions").
    if (given) return "slots are given twice (\"" + p + "\"); give them once";
    given = true;
    slots = eq == std::string::npos ? std::nullopt : parse_count(p.substr(eq + 1), kMaxRanks);
    if (!slots) return "\"" + p + "\" is not slots=N (N a whole number from 1 to " +
                       std::to_string(kMaxRanks) + ")";
  }
  return "";
}

// A setting mpirun's hostfile parser does not take: it stops with an "internal error" ("slot=2"
// for slots=2, a misspelt key) or, for a max_slots below the slots given before it, refuses the
// line (given first, it is raised to the slots). Words without "=" are left to mpirun.
std::string hostfile_setting_error(const std::vector<std::string>& settings) {
  static const std::set<std::string> known = {
      "slots", "count", "cpu", "slots-max", "slots_max", "max-slots", "max_slots", "cpu-max",
      "cpu_max", "max-cpu", "max_cpu", "count-max", "count_max", "max-count", "max_count",
      "username", "user-name", "user_name", "boards", "sockets", "sockets_per_board",
      "sockets-per-board", "cores", "cores_per_socket", "cores-per-socket", "cpu_set", "cpu-set"};
  std::optional<int> slots;  // as given so far
  for (const std::string& p : settings) {
    const auto eq = p.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = lower(p.substr(0, eq));
    if (names_slots(key)) slots = parse_count(p.substr(eq + 1), kMaxRanks);
    if (key == "slot") {
      return "\"" + p + "\" is not a hostfile setting (slots" + p.substr(eq) + " gives the slots)";
    }
    if (known.count(key) == 0) {
      return "\"" + p + "\" is not a hostfile setting mpirun takes (slots=N, max_slots=N, ...)";
    }
    const bool max = key.find("max") != std::string::npos;
    const std::optional<int> limit = parse_count(p.substr(eq + 1), kMaxRanks);
    if (max && slots && limit && *limit < *slots) {
      return "\"" + p + "\" is below slots=" + std::to_string(*slots) +
             " (mpirun refuses the line)";
    }
  }
  return "";
}

// "node:4" is -H's form: in a hostfile mpirun takes it for a host of that name (ssh "node:4").
// An IPv6 address has more than one colon.
std::string host_colon_slots_error(const std::string& host) {
  const auto colon = host.find(':');
  if (colon == std::string::npos || host.find(':', colon + 1) != std::string::npos) return "";
  const std::string after = host.substr(colon + 1);
  if (after.empty() || !std::all_of(after.begin(), after.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      })) {
    return "";
  }
  return "\"" + host + "\" is -H's form; a hostfile line says \"" + host.substr(0, colon) +
         " slots=" + after + "\"";
}

}  // namespace

std::optional<int> parse_count(const std::string& text, int max) {
  int v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 1 || v > max) {
    return std::nullopt;
  }
  return v;
}

std::string host_name_error(const std::string& name) {
  if (name.empty()) return "an empty host name";
  if (without_user(name).empty()) return "host \"" + name + "\" has no name after \"@\"";
  if (name.front() == '-' || without_user(name).front() == '-') {
    return "host \"" + name + "\" starts with \"-\", which ssh would read as an option";
  }
  for (const char c : name) {
    if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c))) {
      return "host \"" + name + "\" contains a blank or a control character";
    }
  }
  return "";
}

std::string parse_host_list(const std::string& text, std::vector<HostSlots>& out) {
  out.clear();
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    const std::size_t colon = item.find(':');
    const std::optional<int> n =
        colon == std::string::npos ? 1 : parse_count(item.substr(colon + 1), kMaxRanks);
    if (colon == 0 || item.empty() || !n) {
      return "-H: \"" + item + "\" is not HOST or HOST:SLOTS (SLOTS a whole number >= 1)";
    }
    HostSlots h{item.substr(0, colon), *n};
    if (std::string err = host_name_error(h.name); !err.empty()) return "-H: " + err;
    out.push_back(std::move(h));
    pos = end + 1;
  }
  return "";
}

std::string host_list_text(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const HostSlots& h : hosts) {
    out += (out.empty() ? "" : ",") + h.name + ":" + std::to_string(h.slots);
  }
  return out;
}

std::string parse_hostfile(const std::string& text, long long default_slots,
                           std::vector<HostSlots>& out) {
  out.clear();
  std::istringstream lines(text);
  int number = 0;
  // Each host's first line, and whether any of its lines gave slots=: mpirun refuses a host
  // listed again beside slots= with an "internal error" ("Mixing the two methods").
  std::map<std::string, std::pair<int, bool>> seen;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const std::string where = "line " + std::to_string(number) + ": ";
    // mpirun's parser stops at it ("parse error"); a blank to the words below.
    if (line.find('\r') != std::string::npos) {
      return where + "a carriage return (a file written on Windows): mpirun cannot read it; "
                     "convert the file (dos2unix)";
    }
    line = line.substr(0, std::min(line.find('#'), line.find("//")));  // mpirun's comments
    std::istringstream words(line);
    std::string host;
    if (!(words >> host)) continue;
    if (std::string err = host_name_error(host); !err.empty()) return where + err;
    if (std::string err = host_colon_slots_error(host); !err.empty()) return where + err;
    std::string rest;
    std::getline(words, rest);
    const std::vector<std::string> settings = hostfile_settings(rest);
    std::optional<long long> slots;
    if (std::string err = hostfile_slots(settings, slots); !err.empty()) return where + err;
    if (std::string err = hostfile_setting_error(settings); !err.empty()) {
      return where + err;
    }
    auto [first, added] = seen.try_emplace(host, number, slots.has_value());
    first->second.second = first->second.second || slots.has_value();
    if (!added && first->second.second) {
      return where + host + " is listed again (first on line " +
             std::to_string(first->second.first) +
             "); with slots= list each host once, with all its slots (" + host + " slots=N)";
    }
    out.push_back({host, slots.value_or(default_slots)});
  }
  return "";
}

bool is_this_host(const std::string& written) {
  const std::string name = lower(without_user(written));
  if (name == "localhost" || name.rfind("localhost.", 0) == 0 || name.rfind("127.", 0) == 0 ||
      name == "::1") {
    return true;
  }
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) == 0 && buf[0] != '\0') {
    const std::string self = lower(buf);
    if (name == self || name == short_name(self) || short_name(name) == self) return true;
  }
  return is_interface_address(name);
}

bool resolves(const std::string& name) {
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(without_user(name).c_str(), nullptr, nullptr, &found);
  if (found != nullptr) freeaddrinfo(found);
  return rc == 0;
}

namespace {

// What `world` ranks filling `ordered` slot by slot give each host that gets some: its index
// there, its first rank and how many it gets.
struct HostShare {
  std::size_t host;
  long long first;
  long long ranks;
};

std::vector<HostShare> host_shares(const std::vector<HostSlots>& ordered, long long world) {
  std::vector<HostShare> shares;
  long long first = 0;
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    const long long take = std::min(ordered[i].slots, world - first);
    if (take <= 0) break;
    shares.push_back({i, first, take});
    first += take;
  }
  return shares;
}

// The share of the host that holds `rank`; nullopt for a rank no host gets.
std::optional<HostShare> place_of_rank(const std::vector<HostSlots>& ordered, long long rank,
                                       long long world) {
  for (const HostShare& share : host_shares(ordered, world)) {
    if (rank >= share.first && rank < share.first + share.ranks) return share;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> node_of_rank(const std::vector<HostSlots>& ordered, int rank, int world,
                                int local_size) {
  const std::optional<HostShare> place = place_of_rank(ordered, rank, world);
  if (!place || place->ranks != local_size) return std::nullopt;
  return static_cast<int>(place->host);
}

std::string host_of_rank(const std::vector<HostSlots>& ordered, long long rank,
                         long long world) {
  const std::optional<HostShare> place = place_of_rank(ordered, rank, world);
  return place ? ordered[place->host].name : "";
}

namespace {

// "ranks 0-1", "rank 2".
std::string ranks_text(const HostShare& share) {
  const std::string first = std::to_string(share.first);
  return share.ranks == 1 ? "rank " + first
                          : "ranks " + first + "-" + std::to_string(share.first + share.ranks - 1);
}

}  // namespace

std::string ranks_by_host(const std::vector<HostSlots>& ordered, long long world) {
  std::string out;
  for (const HostShare& share : host_shares(ordered, world)) {
    out += (out.empty() ? "" : ", ") + ordered[share.host].name + " " + ranks_text(share);
  }
  return out;
}

std::string unheard_hosts(const std::vector<HostSlots>& ordered, long long world,
                          const std::set<int>& heard) {
  std::string out;
  for (const HostShare& share : host_shares(ordered, world)) {
    const auto on_this_host = [&](int r) {
      return r >= share.first && r < share.first + share.ranks;
    };
    if (std::any_of(heard.begin(), heard.end(), on_this_host)) continue;
    out += (out.empty() ? "" : ", ") + ordered[share.host].name + " (" + ranks_text(share) + ")";
  }
  return out;
}

}  // namespace synk::launch
