// A child forked after synk started MPI, which destroys its copy of the Communicator and exits
// normally: synk's exit handler ran in it too and called MPI_Finalize, which waited for the
// other ranks for ever (the child is no rank), and the copy's end marked the parent's place in
// the shared memory closed, failing the others' next call with it. Now the child ends at once,
// touching nothing of the parent's; the parent, a rank, goes on. Exit 0 when every rank's child
// ended within 10 s and the ranks' call after the fork is right.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "synk/synk.h"

int main() {
  auto owned = std::make_unique<synk::Communicator>();  // synk starts MPI, finalizes it at exit
  synk::Communicator& comm = *owned;
  float x = 1.0f;
  comm.all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  const pid_t child = fork();
  if (child == 0) {  // as a Python child's sys.exit(0), which tears its modules down
    owned.reset();
    std::exit(0);
  }
  int status = 0;
  bool ended = false;
  for (int i = 0; i < 1000 && !ended; ++i) {
    ended = waitpid(child, &status, WNOHANG) == child;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!ended) {
    std::fprintf(stderr, "rank %d: the forked child did not end within 10 s\n", comm.rank());
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  // Rank 0 late, so that the others' liveness checks (every 10 ms) look at its place while they
  // wait for it: a child that marked it closed failed them.
  if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  float y = 1.0f;
  comm.all_reduce(&y, &y, 1, synk::DataType::float32, synk::ReduceOp::sum);
  const bool right = x == static_cast<float>(comm.size()) && y == x;
  std::printf("rank %d: child %s, sums %s\n", comm.rank(), ended ? "ended" : "hung",
              right ? "right" : "wrong");
  return ended && right ? 0 : 1;
}
