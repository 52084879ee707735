// See segment_share.h.
#include "backends/shm/segment_share.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <sstream>

#include "backends/shm/cpu_share.h"
#include "backends/shm/shm_settings.h"
#include "backends/shm/stale_segments.h"
#include "core/env.h"
#include "core/logging.h"
#include "core/mpi_check.h"
#include "synk/error.h"

namespace synk::shm {

namespace {

// What rank 0 sends: where the segment is, or why there is none.
struct Offer {
  enum : std::int32_t { none = 0, anonymous = 1, named = 2 };
  std::int32_t kind = none;
  std::int32_t unused = 0;
  SegmentHandle handle;
  char name[256] = {};
  char error[512] = {};
};

// A number of bytes, or 0 for none ("max", empty).
std::uint64_t bytes_in(const std::string& text) {
  std::uint64_t v = 0;
  return std::sscanf(text.c_str(), "%" SCNu64, &v) == 1 ? v : 0;
}

// One round: rank 0 makes a segment of `kind` (Offer::anonymous or named) and every rank maps it.
SharedSegment share_once(MPI_Comm comm, int rank, std::size_t bytes, std::int32_t kind) {
  SharedSegment out;
  Offer offer;
  if (rank == 0) {
    try {
      if (kind == Offer::anonymous) {
        out.segment = Segment::create_anonymous(bytes);
        offer.handle = out.segment.handle();
      } else {
        const std::string no_room = memory_room_error(bytes, "shared memory");
        if (!no_room.empty()) throw Error(ErrorCode::System, no_room);
        out.segment = Segment::create(bytes);
      }
      offer.kind = kind;
      std::snprintf(offer.name, sizeof offer.name, "%s", out.segment.name().c_str());
    } catch (const Error& e) {
      std::snprintf(offer.error, sizeof offer.error, "%s", e.message().c_str());
    } catch (const std::exception& e) {  // bad_alloc: the others must still leave the Bcast
      std::snprintf(offer.error, sizeof offer.error, "%s", e.what());
    }
  }
  SYNK_CHECK_MPI(MPI_Bcast(&offer, sizeof offer, MPI_BYTE, 0, comm));
  if (offer.kind == Offer::none) {
    out.error = offer.error;
    return out;  // the same on every rank: no collective follows
  }
  out.created = true;
  int mapped = 1;
  if (rank != 0) {
    try {
      out.segment = offer.kind == Offer::anonymous ? Segment::open_anonymous(offer.handle, bytes)
                                                   : Segment::open(offer.name, bytes);
    } catch (const Error& e) {
      out.error = e.message();
      mapped = 0;
    } catch (const std::exception& e) {  // as above: the Allreduce must still be met
      out.error = e.what();
      mapped = 0;
    }
  }
  int all = 0;
  SYNK_CHECK_MPI(MPI_Allreduce(&mapped, &all, 1, MPI_INT, MPI_MIN, comm));
  // Every rank has mapped it (or failed): the descriptor, or the name, is no longer needed.
  out.segment.close_handle();
  out.segment.unlink();
  out.ok = all != 0;
  if (!out.ok) out.segment = Segment();
  return out;
}

// Once a process, before its first segment: what an earlier job's dead creator left behind.
void sweep_stale_segments_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string& name : remove_stale_segments()) {
      SYNK_LOG_AT(info, "shm: removed /dev/shm/" << name
                            << ", a segment whose creator died before every rank had mapped it");
    }
  });
}

}  // namespace

SharedSegment try_share_segment(MPI_Comm comm, std::size_t bytes, SegmentKind kind) {
  int rank = 0;
  SYNK_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  // Read on every rank, before any collective: a malformed SYNK_SHM_* variable throws, and it
  // must throw everywhere, not leave the other ranks in rank 0's broadcast.
  const bool named_only = detail::shm_settings().named_segments_only;
  if (rank == 0) sweep_stale_segments_once();
  // Rank 0 decides, for all: the ranks could read different limits at different moments.
  int anonymous = 0;
  if (rank == 0) {
    anonymous = kind == SegmentKind::any && !named_only && bytes <= anonymous_segment_limit();
  }
  SYNK_CHECK_MPI(MPI_Bcast(&anonymous, 1, MPI_INT, 0, comm));
  if (!anonymous) return share_once(comm, rank, bytes, Offer::named);
  SharedSegment s = share_once(comm, rank, bytes, Offer::anonymous);
  if (s.ok) return s;
  // A rank that cannot open another's descriptor (a /proc that does not show rank 0, as in a
  // PID namespace with a /proc of its own; a process that is not dumpable), or a kernel without
  // memfd: the named kind works there.
  const std::string why = s.error.empty() ? "on another rank" : s.error;
  SYNK_LOG_AT(info, "shm: an anonymous segment of " << bytes << " bytes could not be shared ("
                                                    << why << "); using a named one");
  SharedSegment named = share_once(comm, rank, bytes, Offer::named);
  // Where this rank has a reason for the named one's failure, the anonymous one's goes with
  // it: it may be the one to mend. (A rank that did its part keeps an empty error.)
  if (!named.ok && !named.error.empty()) {
    named.error += " (an anonymous one failed before: " + why + ")";
  }
  return named;
}

std::optional<std::uint64_t> meminfo_bytes(const std::string& meminfo, const std::string& field) {
  std::istringstream lines(meminfo);
  const std::string key = field + ":";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key, 0) == 0) return bytes_in(line.substr(key.size())) * 1024;
  }
  return std::nullopt;
}

std::uint64_t anonymous_segment_limit(const std::string& meminfo, std::uint64_t cgroup_room) {
  const std::uint64_t available = meminfo_bytes(meminfo, "MemAvailable").value_or(0);
  const std::uint64_t total = meminfo_bytes(meminfo, "MemTotal").value_or(0);
  const std::uint64_t shmem = meminfo_bytes(meminfo, "Shmem").value_or(0);
  // Half of what is still available, and all shared memory together (memfds count in Shmem)
  // within half the machine, as /dev/shm's default size holds named segments: one segment
  // after another cannot take it all either.
  const std::uint64_t shared_room = total / 2 > shmem ? total / 2 - shmem : 0;
  return std::min({available / 2, cgroup_room / 2, shared_room});
}

std::uint64_t cgroup_memory_room(const std::string& self_cgroup, const std::string& root) {
  std::uint64_t room = UINT64_MAX;
  // A limit minus the usage, where the directory has a limit (v2's "max" is none; v1's "none"
  // is a number near 2^63, which leaves room enough); a parent's limit binds its children
  // too, so every group up to the top counts.
  const auto take = [&](const std::string& dir, const char* limit_file, const char* usage_file) {
    const std::uint64_t limit = bytes_in(read_file_text(dir + "/" + limit_file));
    if (!limit) return;
    const std::uint64_t used = bytes_in(read_file_text(dir + "/" + usage_file));
    room = std::min(room, limit > used ? limit - used : 0);
  };
  for (const CgroupLine& l : cgroup_lines(self_cgroup)) {
    if (!l.v2 && l.controllers.find(",memory,") == std::string::npos) continue;
    const char* limit_file = l.v2 ? "memory.max" : "memory.limit_in_bytes";
    const char* usage_file = l.v2 ? "memory.current" : "memory.usage_in_bytes";
    for_each_cgroup_up(l.v2 ? root : root + "/memory", l.path,
                       [&](const std::string& dir) { take(dir, limit_file, usage_file); });
  }
  return room;
}

std::uint64_t named_segment_limit(const std::string& meminfo, std::uint64_t cgroup_room) {
  const std::optional<std::uint64_t> available = meminfo_bytes(meminfo, "MemAvailable");
  if (!available) return cgroup_room;
  const std::uint64_t swap = meminfo_bytes(meminfo, "SwapFree").value_or(0);
  return std::min(*available + swap, cgroup_room);
}

std::string memory_room_error(std::uint64_t bytes, const std::string& what) {
  const std::uint64_t limit = named_segment_limit();
  if (bytes <= limit) return "";
  return "cannot reserve " + std::to_string(bytes) + " bytes of " + what + ": more than the " +
         std::to_string(limit) +
         " bytes of memory this process may still take (MemAvailable and SwapFree, or its "
         "cgroup's room)";
}

std::uint64_t named_segment_limit() {
  const std::uint64_t room =
      cgroup_memory_room(read_file_text("/proc/self/cgroup"), "/sys/fs/cgroup");
  return named_segment_limit(read_file_text("/proc/meminfo"), room);
}

std::uint64_t anonymous_segment_limit() {
  const std::uint64_t room =
      cgroup_memory_room(read_file_text("/proc/self/cgroup"), "/sys/fs/cgroup");
  return anonymous_segment_limit(read_file_text("/proc/meminfo"), room);
}

}  // namespace synk::shm
