// Master-driven mode's messages (synk/distribute.h): the request packet's sends and receive,
// and the watch on this node's ranks that lets their waits end in an error when a rank dies.
#include "data/request_packet.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/backoff.h"
#include "core/env.h"
#include "core/liveness.h"
#include "core/mpi_check.h"
#include "core/mpi_runtime.h"
#include "core/mpi_tags.h"
#include "core/poll_request.h"
#include "synk/error.h"

namespace synk::detail {

namespace {

// A packet whose message was abandoned: the send or receive is still pending, so MPI may yet
// read or write its memory. It is never freed (the job cannot be driven any more).
void keep_forever(std::vector<unsigned char>&& packet) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::vector<unsigned char>>;  // never destroyed, on purpose
  const std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(packet));  // a moved vector keeps its buffer where it was
}

}  // namespace

void PeerWatch::start(Communicator& comm) {
  const std::int64_t mine[3] = {static_cast<std::int64_t>(getpid()), comm.node(),
                                static_cast<std::int64_t>(pid_namespace_id())};
  std::vector<std::int64_t> all(3 * static_cast<std::size_t>(comm.size()));
  comm.all_gather(mine, all.data(), 3, DataType::int64);
  pids_.assign(static_cast<std::size_t>(comm.size()), 0);
  for (int r = 0; r < comm.size(); ++r) {
    const std::int64_t* theirs = &all[3 * static_cast<std::size_t>(r)];
    // A peer in another PID namespace on this node (a container of its own) is not watched:
    // its pid is nobody here, or another process, so its absence would read as a death.
    if (theirs[1] != comm.node() || r == comm.rank()) continue;
    if (pid_watchable(theirs[0], static_cast<std::uint64_t>(theirs[2]),
                      static_cast<std::uint64_t>(mine[2]))) {
      pids_[static_cast<std::size_t>(r)] = theirs[0];
    }
  }
}

std::string PeerWatch::deaths() const {
  std::string text;
  for (std::size_t r = 0; r < pids_.size(); ++r) {
    if (pids_[r] <= 0 || process_alive(pids_[r])) continue;
    text += (text.empty() ? "rank " : ", rank ") + std::to_string(r) + " (pid " +
            std::to_string(pids_[r]) + ")";
  }
  if (text.empty()) return text;
  note_peer_lost();  // so that exiting does not wait in MPI_Finalize for the dead
  return text + " died";
}

namespace {

// Polls `req`, one of the packet's sends (the master) or its receive (a worker). A wait for a
// killed rank was seen never to end: every 10 ms the wait looks for dead ranks itself. An idle
// worker sleeps between tests (no yielding phase): it costs little CPU and is never timed out,
// however long the master's serial part takes; the master gives up at `limit`.
using Clock = std::chrono::steady_clock;

Clock::time_point deadline() { return Clock::now() + wait_duration(settings().timeout_s); }

void wait_packet(MPI_Request& req, const Communicator& comm, std::vector<unsigned char>& packet,
                 const PeerWatch& watch, Clock::time_point limit) {
  const bool master = comm.rank() == 0;
  poll_request(
      req, master ? "MPI_Test(the request packet's MPI_Isend)"
                  : "MPI_Test(the request packet's MPI_Irecv)",
      std::chrono::microseconds(500), std::chrono::microseconds(0),
      [&] {
        const std::string deaths = watch.deaths();
        if (!deaths.empty()) {
          throw Error(ErrorCode::Remote, "distribute: " + deaths + "; rank " +
                                             std::to_string(comm.rank()) + " was waiting for " +
                                             (master ? "the request to reach the workers"
                                                     : "the master's next request"));
        }
        if (master && Clock::now() >= limit) {
          note_peer_lost();  // a worker that never answers would hold up MPI_Finalize too
          throw Error(ErrorCode::Timeout,
                      "distribute: rank 0 waited " + seconds_text(settings().timeout_s) +
                          " (SYNK_TIMEOUT) for its request to reach the workers");
        }
      },
      [&] { keep_forever(std::move(packet)); });
}

}  // namespace

void packet_send(const Communicator& comm, std::vector<unsigned char>& packet, std::size_t bytes,
                 const PeerWatch& watch) {
  std::vector<MPI_Request> sends(static_cast<std::size_t>(comm.size() - 1), MPI_REQUEST_NULL);
  try {
    for (int r = 1; r < comm.size(); ++r) {
      SYNK_CHECK_MPI(MPI_Isend(packet.data(), static_cast<int>(bytes), MPI_BYTE, r, kPacketTag,
                               comm.mpi_comm(), &sends[static_cast<std::size_t>(r - 1)]));
    }
  } catch (...) {
    keep_forever(std::move(packet));  // the sends started are still pending
    throw;
  }
  const auto limit = deadline();  // one SYNK_TIMEOUT for all of them
  for (MPI_Request& req : sends) wait_packet(req, comm, packet, watch, limit);
}

void packet_receive(const Communicator& comm, std::vector<unsigned char>& packet,
                    const PeerWatch& watch) {
  MPI_Request req = MPI_REQUEST_NULL;
  SYNK_CHECK_MPI(MPI_Irecv(packet.data(), static_cast<int>(packet.size()), MPI_BYTE, 0, kPacketTag,
                           comm.mpi_comm(), &req));
  wait_packet(req, comm, packet, watch, deadline());
}

}  // namespace synk::detail
