// The hosts of a job as synkrun reads them before mpirun does: -H's "host[:slots],..." and a
// hostfile's "host [slots=N] ..." lines. synkrun checks them for what mpirun would not refuse
// (a name that an rsh agent would take as its own option) and counts the ranks that mpirun's
// by-slot mapping puts on this host, so that its ranks-per-core guard sees them.
#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace synk::launch {

// Beyond this many ranks (-np) or slots on a host, a count is a typo, not a job: a plan for
// 2^31 ranks ran out of memory.
inline constexpr int kMaxRanks = 1 << 20;

// `text` as a whole number from 1 to `max`, or nullopt (-np's ranks, -H's and hostfile slots).
std::optional<int> parse_count(const std::string& text, int max);

struct HostSlots {
  std::string name;  // as written, possibly user@host
  long long slots = 1;
};

// Why `name` cannot be a host, or "": empty, blank or control characters, or a leading "-"
// (itself or after "user@"), which ssh would read as an option ("-oProxyCommand=...").
std::string host_name_error(const std::string& name);

// -H's list. Returns an error (without "synkrun: ") or "".
std::string parse_host_list(const std::string& text, std::vector<HostSlots>& out);

// The list as -H writes it, "host:slots,..." (parse_host_list's inverse).
std::string host_list_text(const std::vector<HostSlots>& hosts);

// A hostfile's text: one host a line, "slots=N" (or count=, cpu=) after it, "#" comments.
// A host without slots gets `default_slots` (Open MPI: the host's cores, unknown here).
std::string parse_hostfile(const std::string& text, long long default_slots,
                           std::vector<HostSlots>& out);

// Whether `name` (possibly user@host) is this machine: localhost, a loopback address, this
// host's name (short or full) or one of its interface addresses.
bool is_this_host(const std::string& name);

// Whether `name` (possibly user@host) resolves to an address here (getaddrinfo).
bool resolves(const std::string& name);

// The slots of all the hosts; nullopt where a host's are unknown (0: a hostfile line without
// slots= has the host's cores).
inline std::optional<long long> total_slots(const std::vector<HostSlots>& hosts) {
  long long slots = 0;
  for (const HostSlots& h : hosts) {
    if (h.slots <= 0) return std::nullopt;
    slots += h.slots;
  }
  return slots;
}

// Why a hostfile that names this machine twice, under two names each with slots= (vm and
// 127.0.0.1), cannot run, or "": mpirun counts every name of itself as one node and refuses the
// second definition with an "internal error". (-H takes such a list.)
template <typename IsLocal>
std::string local_names_error(const std::vector<HostSlots>& hosts, IsLocal is_local) {
  const HostSlots* first = nullptr;
  for (const HostSlots& h : hosts) {
    if (h.slots <= 0 || !is_local(h.name)) continue;
    if (first == nullptr) {
      first = &h;
    } else if (h.name != first->name) {
      return first->name + " and " + h.name + " are both this host, each with slots=: mpirun " +
             "refuses a host defined twice; list it once, with all its slots";
    }
  }
  return "";
}

// The hosts in the order mpirun's by-slot mapping fills them: first mpirun's own node, which
// Open MPI fills first, as one entry for all those is_local accepts whatever their names (it
// counts every name of itself as one node), under the first of them; then the others as listed.
// A name listed twice is one host with the slots of both.
template <typename IsLocal>
std::vector<HostSlots> mapping_order(const std::vector<HostSlots>& hosts, IsLocal is_local) {
  std::vector<HostSlots> out;
  for (const HostSlots& h : hosts) {
    if (!is_local(h.name)) continue;
    if (out.empty()) {
      out.push_back(h);
    } else {
      out.front().slots += h.slots;
    }
  }
  const std::size_t first_remote = out.size();
  for (const HostSlots& h : hosts) {
    if (is_local(h.name)) continue;
    const auto same = std::find_if(out.begin() + static_cast<long>(first_remote), out.end(),
                                   [&](const HostSlots& o) { return o.name == h.name; });
    if (same == out.end()) {
      out.push_back(h);
    } else {
      same->slots += h.slots;
    }
  }
  return out;
}

// How many of `np` ranks (all slots when unset) mpirun's by-slot mapping places on the hosts
// that is_local says are this one: it fills each host's slots in mapping_order.
template <typename IsLocal>
long long ranks_on_this_host(const std::vector<HostSlots>& hosts, std::optional<long long> np,
                             IsLocal is_local) {
  long long left = np ? *np : -1, here = 0;
  for (const HostSlots& h : mapping_order(hosts, is_local)) {
    const long long take = left < 0 ? h.slots : std::min(left, h.slots);
    if (is_local(h.name)) here += take;
    if (left >= 0) left -= take;
  }
  return here;
}

// The index of the node (among those that get ranks) that holds `rank` when `world` ranks fill
// `ordered` (mapping_order's) slot by slot; nullopt where that node would not hold
// `local_size` ranks, which says the job was not mapped so.
std::optional<int> node_of_rank(const std::vector<HostSlots>& ordered, int rank, int world,
                                int local_size);

// The host (as `ordered` names it) that holds `rank` when `world` ranks fill `ordered`
// (mapping_order's) slot by slot, or "" when no host does.
std::string host_of_rank(const std::vector<HostSlots>& ordered, long long rank,
                         long long world);

// Which ranks each host gets when `world` ranks fill `ordered` (mapping_order's) slot by slot:
// "hostA ranks 0-1, hostB ranks 2-3" (the hosts that get none left out).
std::string ranks_by_host(const std::vector<HostSlots>& ordered, long long world);

// The hosts that get ranks but none of `heard` when `world` ranks fill `ordered` slot by slot:
// "hostB (ranks 2-3), hostC (rank 4)", or "" where every host has one.
std::string unheard_hosts(const std::vector<HostSlots>& ordered, long long world,
                          const std::set<int>& heard);

}  // namespace synk::launch
