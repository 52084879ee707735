// A node leader's MPI call between the nodes fails (fail_one_allreduce.c on world rank 0, with
// SYNK_SIMULATE_NODES=2 on 4 ranks): check_leader_fail.sh wants rank 1, on the leader's node,
// to fail at once naming that error, where it waited out SYNK_TIMEOUT for its leader before.
// Each rank prints how its all_reduce ended and how long it took; a rank that failed aborts
// the job after a second, so that the other leader, left inside MPI, does not hold it up.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "synk/synk.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  synk::Communicator comm(MPI_COMM_WORLD, synk::CommOptions{"auto"});
  std::vector<float> send(100, 1.0f), recv(100);
  const auto t0 = std::chrono::steady_clock::now();
  const auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  try {
    comm.all_reduce(send.data(), recv.data(), send.size(), synk::DataType::float32,
                    synk::ReduceOp::sum);
    std::printf("rank %d: returned after %.1f s\n", comm.rank(), seconds());
  } catch (const synk::Error& e) {
    std::printf("rank %d: failed after %.1f s: %s\n", comm.rank(), seconds(), e.what());
    std::fflush(stdout);
    sleep(1);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
