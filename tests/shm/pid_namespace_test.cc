// Ranks of one node in different PID namespaces (a rank in a container of its own that shares
// the node's memory), with real processes: check_pid_namespace.sh starts this under mpiexec
// with the last rank in a new PID namespace. Its descriptors cannot be reached through /proc
// there, so the shm segment and the Data segment fall back to named ones; and a peer's pid
// means nothing across the namespaces, so a rank that waits while another is busy must not
// take it for dead (it did: "rank 0 (pid 17381) died" after a 10 ms wait). Its own main: the
// verdict is one line per rank.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "synk/synk.h"

namespace {

int say(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main() {
  synk::Communicator comm;
  const int me = comm.rank(), n = comm.size();
  const std::string who = "pid_namespace: rank " + std::to_string(me);
  try {
    synk::Data<float> d(comm, {4, 2});
    std::vector<float> values;
    if (me == 0) values = {1, 2, 3, 4, 5, 6, 7, 8};
    d.set_value(values);
    if (d.data()[7] != 8.0f)
      return say(who + " FAILED: the Data segment holds the wrong values\n"), 1;
    // Every rank waits well past the 10 ms after which a waiting rank checks that the ranks it
    // waits for are alive, for a rank busy elsewhere (rank 0, then the last rank).
    for (int busy : {0, n - 1}) {
      if (me == busy) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::vector<float> x(1000, static_cast<float>(me + 1));
      comm.all_reduce(x);
      if (x[999] != static_cast<float>(n * (n + 1) / 2)) {
        return say(who + " FAILED: all_reduce gave " + std::to_string(x[999]) + "\n"), 1;
      }
    }
    say(who + " ok (Data segment " + d.segment_name() + ")\n");
  } catch (const std::exception& e) {
    return say(who + " FAILED: " + e.what() + "\n"), 1;
  }
  return 0;
}
