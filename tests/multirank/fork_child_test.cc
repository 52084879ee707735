// A child forked after synk started MPI, which exits normally: synk's exit handler ran in it
// too and called MPI_Finalize, which waited for the other ranks for ever (the child is no rank).
// Now the child ends at once; the parent, a rank, goes on. Exit 0 when every rank's child
// ended within 10 s and the ranks' call after the fork is right.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "synk/synk.h"

int main() {
  synk::Communicator comm;  // synk starts MPI, and finalizes it at exit
  float x = 1.0f;
  comm.all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  const pid_t child = fork();
  if (child == 0) std::exit(0);  // runs the exit handlers, as Python's sys.exit(0) does
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
  float y = 1.0f;
  comm.all_reduce(&y, &y, 1, synk::DataType::float32, synk::ReduceOp::sum);
  const bool right = x == static_cast<float>(comm.size()) && y == x;
  std::printf("rank %d: child %s, sums %s\n", comm.rank(), ended ? "ended" : "hung",
              right ? "right" : "wrong");
  return ended && right ? 0 : 1;
}
