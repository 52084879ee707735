// A rank that never joins a collective on a backend that waits inside MPI (check_mpi_stall.sh):
//   stall BACKEND:  the last rank sleeps while the others all_reduce;
//   reject BACKEND: the last rank's all_reduce has no recv buffer, which it alone rejects (no
//                   SYNK_CHECK_CALLS), and it goes on to sleep; the others wait in MPI_Allreduce.
//   istall BACKEND: as stall, but under MPI_THREAD_MULTIPLE the others' call is a non-blocking
//                   one, which the progress thread has started before they wait for it.
//   vstall BACKEND: as stall, with a gatherv, which the auto backend first routes by memory
//                   in an MPI all-reduce of its own (where built with NCCL).
//   progress BACKEND: no rank stalls, but one all_reduce (run with SYNK_MPI_MAX_CHUNK=1: one MPI
//                   call per element) takes longer than SYNK_TIMEOUT and its grace in all.
//   create BACKEND: the last rank sleeps while the others make a Communicator;
//   split BACKEND:  the last rank sleeps while the others split theirs (steps of synk's own that
//                   are no call: the watchdog ends them after SYNK_TIMEOUT, at least 10 s).
//   data BACKEND:   the last rank sleeps while the others set a Data's value (a step too).
//   start BACKEND:  synk starts MPI, and the last rank sleeps before it: the others wait in
//                   MPI_Init_thread (a step too; it waited for ever).
//   compare BACKEND RANKS: the calls are compared first (SYNK_CHECK_CALLS=1, or hier): after one
//                   call on every rank, RANKS (say "1,3") sleep while the others all_reduce;
//                   each of those prints its Timeout, which must name exactly those ranks
//                   (check_compare_stall.sh), and the job ends by MPI_Abort.
// The waiting ranks must end the job within SYNK_TIMEOUT and a grace, naming their call; a call
// that keeps making progress must not be cut short.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "synk/synk.h"

namespace {

// Whether `rank` is in the comma-separated list `ranks`.
bool listed(const std::string& ranks, int rank) {
  std::istringstream in(ranks);
  for (std::string r; std::getline(in, r, ',');) {
    if (r == std::to_string(rank)) return true;
  }
  return false;
}

// compare: a first call on every rank (so the ranks learn each other's nodes), then the listed
// ranks stay away from the second.
void compare_mode(synk::Communicator& comm, const std::string& stuck) {
  float x = 1.0f;
  comm.all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  if (comm.rank() == 0) std::fprintf(stderr, "backend %s\n", comm.backend().c_str());
  if (listed(stuck, comm.rank())) {
    std::fprintf(stderr, "rank %d pid %d sleeps\n", comm.rank(), static_cast<int>(getpid()));
    sleep(120);
  }
  try {
    comm.all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  } catch (const synk::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", comm.rank(), e.what());
    // The comparison gave up: the next call cannot be compared, and says so at once.
    const auto t0 = std::chrono::steady_clock::now();
    try {
      comm.all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
      std::fprintf(stderr, "rank %d: the next call returned\n", comm.rank());
    } catch (const synk::Error& next) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "rank %d: next call after %.1f s: %s\n", comm.rank(), s, next.what());
    }
    sleep(1);  // every waiting rank reports before the first abort ends the job
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
}

// start: the ranks know theirs from the launcher only, since MPI is not started yet.
int start_mode(const char* backend) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (rank != nullptr && size != nullptr && std::atoi(rank) == std::atoi(size) - 1) sleep(120);
  synk::Communicator comm(synk::CommOptions{backend});
  std::fprintf(stderr, "rank %d: the communicator was made\n", comm.rank());
  return 0;
}

// create: the last rank sleeps while the others make a Communicator.
int create_mode(const char* backend) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == size - 1) sleep(120);
  synk::Communicator comm(MPI_COMM_WORLD, synk::CommOptions{backend});
  std::fprintf(stderr, "rank %d: the communicator was made\n", rank);
  MPI_Finalize();
  return 0;
}

// split: the odd rank sleeps while the others split comm.
void split_mode(synk::Communicator& comm, bool odd) {
  if (odd) sleep(120);
  synk::Communicator part = comm.split(0, 0);
  std::fprintf(stderr, "rank %d: the split returned\n", comm.rank());
}

// data: the odd rank sleeps while the others set a Data's value.
void data_mode(synk::Communicator& comm, bool odd) {
  synk::Data<float> data(comm, {4});
  if (odd) sleep(120);
  const std::vector<float> values(4, 1.0f);
  data.set_value(std::span<const float>(values));
  std::fprintf(stderr, "rank %d: set_value returned\n", comm.rank());
}

// stall: the odd rank sleeps while the others all_reduce.
void stall_mode(synk::Communicator& comm, bool odd) {
  float x = 1.0f;
  if (odd) {
    sleep(120);
  } else {
    comm.all_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  }
}

// vstall: the odd rank sleeps while the others gatherv.
void vstall_mode(synk::Communicator& comm, bool odd) {
  float x = 1.0f;
  if (odd) {
    sleep(120);
  } else {
    std::vector<float> all(static_cast<std::size_t>(comm.size()));
    const std::vector<std::size_t> counts(all.size(), 1);
    comm.gatherv(&x, 1, all.data(), counts, synk::DataType::float32, 0);
  }
}

// istall: the odd rank sleeps while the others wait for a non-blocking all_reduce.
void istall_mode(synk::Communicator& comm, bool odd) {
  float x = 1.0f;
  if (odd) {
    sleep(120);
  } else {
    synk::Request r = comm.iall_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the progress thread has it
    r.wait();
  }
}

// iorder: below MPI_THREAD_MULTIPLE non-blocking calls run at issue: issued on two communicators
// in opposite orders, each rank waits in its first for the other (legal with MPI's own).
void iorder_mode(synk::Communicator& comm, bool odd, const char* backend) {
  float x = 1.0f;
  synk::Communicator other(MPI_COMM_WORLD, synk::CommOptions{backend});
  synk::Communicator& first = odd ? other : comm;
  synk::Communicator& second = odd ? comm : other;
  float y = 1.0f;
  synk::Request r1 = first.iall_reduce(&x, &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  synk::Request r2 = second.iall_reduce(&y, &y, 1, synk::DataType::float32, synk::ReduceOp::sum);
  r1.wait();
  r2.wait();
}

// progress: one all_reduce that keeps making progress for longer than SYNK_TIMEOUT.
void progress_mode(synk::Communicator& comm) {
  std::vector<float> v(std::size_t{32} << 20, 1.0f);
  const auto t0 = std::chrono::steady_clock::now();
  comm.all_reduce(v.data(), v.data(), v.size(), synk::DataType::float32, synk::ReduceOp::sum);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "rank %d: one all_reduce took %.1f s, v[last] = %.0f\n", comm.rank(), s,
               static_cast<double>(v.back()));
}

// reject: the odd rank's all_reduce has no recv buffer; it rejects it and sleeps.
void reject_mode(synk::Communicator& comm, bool odd) {
  float x = 1.0f;
  try {
    comm.all_reduce(&x, odd ? nullptr : &x, 1, synk::DataType::float32, synk::ReduceOp::sum);
  } catch (const synk::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", comm.rank(), e.what());
    sleep(120);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "start" && argc == 3) return start_mode(argv[2]);
  if (mode == "istall") {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  if (argc != (mode == "compare" ? 4 : 3)) {
    std::fprintf(stderr,
                 "usage: mpi_stall_test "
                 "stall|vstall|istall|iorder|reject|progress|create|split|data|start BACKEND\n"
                 "       mpi_stall_test compare BACKEND STUCK_RANKS\n");
    return 2;
  }
  if (mode == "create") return create_mode(argv[2]);
  synk::Communicator comm(MPI_COMM_WORLD, synk::CommOptions{argv[2]});
  const bool odd = comm.rank() == comm.size() - 1;
  if (mode == "compare") {
    compare_mode(comm, argv[3]);
  } else if (mode == "split") {
    split_mode(comm, odd);
  } else if (mode == "data") {
    data_mode(comm, odd);
  } else if (mode == "stall") {
    stall_mode(comm, odd);
  } else if (mode == "vstall") {
    vstall_mode(comm, odd);
  } else if (mode == "istall") {
    istall_mode(comm, odd);
  } else if (mode == "iorder") {
    iorder_mode(comm, odd, argv[2]);
  } else if (mode == "progress") {
    progress_mode(comm);
  } else {
    reject_mode(comm, odd);
  }
  std::fprintf(stderr, "rank %d: the call returned\n", comm.rank());
  MPI_Finalize();
  return 0;
}
