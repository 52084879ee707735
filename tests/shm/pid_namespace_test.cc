// Ranks of one node in different PID namespaces (a rank in a container of its own that shares
// the node's memory), with real processes: check_pid_namespace.sh starts this under mpiexec
// with the last rank in a new PID namespace. Its descriptors cannot be reached through /proc
// there, so the shm segment and the Data segment fall back to named ones; and a peer's pid
// means nothing across the namespaces, so a rank that waits while another is busy must not
// take it for dead (it did: "rank 0 (pid 17381) died" after a 10 ms wait), in a collective or
// in a worker's serve(). Its own main: the verdict is one line per rank.
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "synk/distribute.h"
#include "synk/synk.h"
#include "verdict_line.h"

using synk_test::say;

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
    // Master-driven: the workers wait in serve() while the master is busy, checking every
    // 10 ms that the ranks of their node are alive (Distributed's watch).
    synk::Function<float> count(comm, "count", {synk::Collect::sum},
                                [](const synk::SliceInputs<float>& in) {
                                  return synk::Function<float>::Outputs{
                                      {static_cast<float>(in.rows)}};
                                });
    synk::Distributed dist(comm);
    dist.add(count);
    dist.add("d", d);
    dist.serve();  // a worker's returns when the master closes
    if (me == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const auto rows = dist.call(count, {"d"});
      if (rows.empty() || rows[0].size() != 1 || rows[0][0] != 4.0f) {
        return say(who + " FAILED: the master-driven call did not count the 4 rows once\n"), 1;
      }
      dist.close();
    }
    say(who + " ok (Data segment " + d.segment_name() + ")\n");
  } catch (const std::exception& e) {
    return say(who + " FAILED: " + e.what() + "\n"), 1;
  }
  return 0;
}
