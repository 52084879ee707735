// A rank that stops answering (SIGSTOP: alive, but never reaches the call), with real processes
// under mpiexec: check_stuck_rank.sh starts this on 2 or 3 ranks with SYNK_TIMEOUT=2. Rank 1
// stops itself before the second all_reduce; every other rank must get synk::Error(Timeout)
// naming rank 1 and SYNK_TIMEOUT, and then, as a user's program would, return 1 from main. The
// script checks that the job then ends by itself: before the fix, the exit handler's
// MPI_Finalize waited for the stopped rank forever. Its own main, not the shared MPI test main,
// whose closing collectives would wait for the stopped rank.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "synk/synk.h"
#include "verdict_line.h"

namespace {

constexpr int kStuck = 1;

using synk_test::say;

}  // namespace

int main() {
  synk::Communicator comm;
  const int me = comm.rank();
  if (comm.size() < 2) return say("stuck_rank: FAILED: needs at least 2 ranks\n"), 1;

  std::vector<float> x(64, static_cast<float>(me + 1));
  comm.all_reduce(x);  // every rank alive: the job works
  const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
  if (x[0] != want || x[63] != want) {
    return say("stuck_rank: rank " + std::to_string(me) + " FAILED: the first all_reduce gave " +
               std::to_string(x[0]) + ", expected " + std::to_string(want) + "\n"), 1;
  }

  if (me == kStuck) {
    say("stuck_rank: rank " + std::to_string(me) + " pid " + std::to_string(getpid()) +
        " stops\n");
    raise(SIGSTOP);
    return 0;  // reached only if something continues it
  }

  const auto t0 = std::chrono::steady_clock::now();
  try {
    comm.all_reduce(x);
    return say("stuck_rank: rank " + std::to_string(me) +
               " FAILED: the all_reduce with a stopped rank returned\n"), 1;
  } catch (const synk::Error& e) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string msg = e.what();
    // Across (simulated) nodes the calls are compared first; that comparison names the ranks
    // that have not reached it, with their node and its host ("(node 0 on vm)").
    const std::string stuck = "rank " + std::to_string(kStuck);
    const std::string naming = comm.backend() == "hier" ? "for " + stuck + " (node 0 on " : stuck;
    const bool named =
        msg.find(naming) != std::string::npos && msg.find("SYNK_TIMEOUT") != std::string::npos;
    if (e.code() != synk::ErrorCode::Timeout || !named) {
      return say("stuck_rank: rank " + std::to_string(me) + " FAILED: expected a Timeout naming " +
                 "rank 1 and SYNK_TIMEOUT, got " + synk::to_string(e.code()) + ": " + msg +
                 "\n"), 1;
    }
    say("stuck_rank: rank " + std::to_string(me) + " ok after " + std::to_string(s) +
        " s: " + msg + "\n");
    // The first rank to exit makes mpirun end the job: give every other waiting rank time to
    // reach its own Timeout and report first.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    return 1;  // as a program that stops at an error does: the job must end now
  }
}
