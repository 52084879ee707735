// A rank that dies in master-driven mode, with real processes: check_worker_death.sh starts this
// under mpiexec with one rank killing itself (SIGKILL) and reads each survivor's verdict line,
// since mpiexec's exit code cannot tell (with --enable-recovery it is 0 whatever the ranks did).
// Its own main, not the shared MPI test main, whose closing collectives would wait for the dead.
//   body:   the last rank dies inside the callable of a master-driven call
//   idle:   the last rank dies while the master is in its serial part
//   master: the master dies in its serial part; the workers must not serve forever
//   late:   no rank dies: the last one is late in a call, past SYNK_TIMEOUT (1 s here), so the
//           call fails on the master alone; its close() must still release the workers
#include <mpi.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "synk/distribute.h"

namespace {

using Clock = std::chrono::steady_clock;
using synk::ErrorCode;

// Liveness is checked every 10 ms; the tests set SYNK_TIMEOUT far above this bound, so an error
// within it came from the check, not from a deadline.
constexpr double kBoundS = 5.0;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class Verdict {
 public:
  explicit Verdict(int rank) : rank_(rank) {}
  void expect(bool ok, const std::string& what) {
    if (!ok) failures_.push_back(what);
  }
  // One line per failure, or one "ok" line; one write each, so ranks' lines do not interleave.
  int report() const {
    std::string text;
    for (const std::string& f : failures_) {
      text += "worker_death: rank " + std::to_string(rank_) + " FAILED: " + f + "\n";
    }
    if (failures_.empty()) text = "worker_death: rank " + std::to_string(rank_) + " ok\n";
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return failures_.empty() ? 0 : 1;
  }

 private:
  int rank_;
  std::vector<std::string> failures_;
};

// fn must throw synk::Error with `code`, a message holding every one of `parts`, within the bound.
void expect_error(Verdict& v, const std::string& what, const std::function<void()>& fn,
                  ErrorCode code, const std::vector<std::string>& parts) {
  const auto t0 = Clock::now();
  try {
    fn();
    v.expect(false, what + ": returned; expected synk::Error(" + synk::to_string(code) + ")");
  } catch (const synk::Error& e) {
    const double s = since(t0);
    const std::string msg = e.what();
    v.expect(e.code() == code, what + ": code " + synk::to_string(e.code()) + ", expected " +
                                   synk::to_string(code) + " (" + msg + ")");
    for (const std::string& p : parts) {
      v.expect(msg.find(p) != std::string::npos, what + ": no '" + p + "' in: " + msg);
    }
    v.expect(s < kBoundS, what + ": took " + std::to_string(s) + " s");
  } catch (const std::exception& e) {
    v.expect(false, what + ": threw something other than synk::Error: " + e.what());
  }
}

// Mode late: the master's call times out while the last rank is still in its body; close()
// after it must not throw, and every worker's serve() must return (false) once back from it.
int run_late(synk::Communicator& comm, Verdict& v) {
  const int me = comm.rank(), late = comm.size() - 1;
  synk::Data<float> x(comm, {8, 2});
  if (me == 0) std::printf("worker_death: Data segment %s\n", x.segment_name().c_str());
  synk::Function<float> step(comm, "step", {synk::Collect::sum},
                             [&](const synk::SliceInputs<float>& in) {
                               if (me == late) std::this_thread::sleep_for(std::chrono::seconds(2));
                               return synk::Function<float>::Outputs{{static_cast<float>(in.rows)}};
                             });
  synk::Distributed dist(comm);
  dist.add(step);
  dist.add("x", x);
  const auto t0 = Clock::now();
  if (me != 0) {
    try {
      v.expect(!dist.serve(), "serve() returned true on a worker");
    } catch (const std::exception& e) {
      v.expect(false, std::string("serve() threw: ") + e.what());
    }
    v.expect(since(t0) < kBoundS, "serve() took " + std::to_string(since(t0)) + " s");
    return v.report();
  }
  dist.serve();
  expect_error(v, "the call rank " + std::to_string(late) + " is late in",
               [&] { dist.call(step, {"x"}); }, ErrorCode::Timeout, {"SYNK_TIMEOUT"});
  try {
    dist.close();
  } catch (const std::exception& e) {
    v.expect(false, std::string("close() after the timeout threw: ") + e.what());
  }
  return v.report();
}

// Mode late's job. It starts MPI itself, so that every rank finalizes it: synk skips
// MPI_Finalize after a timeout in a process where it started MPI, and here the late rank may
// meet none (the others' posts were all there), and wait in MPI_Finalize for ranks that never
// come. No MPI call is under way once the Distributed has closed.
int late_job(int argc, char** argv) {
  setenv("SYNK_TIMEOUT", "1", 1);  // every rank, before synk reads it
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  {
    synk::Communicator comm;
    Verdict v(comm.rank());
    rc = run_late(comm, v);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "body";
  if (mode != "body" && mode != "idle" && mode != "master" && mode != "late") {
    std::fprintf(stderr, "usage: worker_death_test body|idle|master|late\n");
    return 2;
  }
  if (mode == "late") return late_job(argc, argv);
  synk::Communicator comm;
  const int n = comm.size(), me = comm.rank();
  const int victim = mode == "master" ? 0 : n - 1;
  Verdict v(me);
  if (n < 2) {
    v.expect(false, "needs at least 2 ranks");
    return v.report();
  }

  synk::Data<float> x(comm, {8, 2});
  // For the script, which checks that no segment of the job is left in /dev/shm (the shm
  // group's segment name comes from SYNK_LOG=info).
  if (me == 0) std::printf("worker_death: Data segment %s\n", x.segment_name().c_str());
  int calls = 0;
  synk::Function<float> step(comm, "step", {synk::Collect::sum},
                             [&](const synk::SliceInputs<float>& in) {
                               ++calls;
                               if (me == victim && mode == "body" && calls == 2) raise(SIGKILL);
                               if (me == victim && mode == "idle" && calls == 1) {
                                 // Dies once back in serve(), waiting for the master's next
                                 // request.
                                 std::thread([] {
                                   std::this_thread::sleep_for(std::chrono::milliseconds(50));
                                   raise(SIGKILL);
                                 }).detach();
                               }
                               return synk::Function<float>::Outputs{{static_cast<float>(in.rows)}};
                             });
  synk::Distributed dist(comm);
  dist.add(step);
  dist.add("x", x);

  const std::string named = "rank " + std::to_string(victim) + " (pid ";
  if (me != 0) {
    // A worker: serve() ends with an error naming the dead rank, never waits on forever.
    expect_error(v, "serve() on rank " + std::to_string(me), [&] { dist.serve(); },
                 ErrorCode::Remote, {named, "died"});
    return v.report();
  }
  dist.serve();
  const auto rows = dist.call(step, {"x"});  // every rank alive: the job works
  v.expect(!rows.empty() && rows[0].size() == 1 && rows[0][0] == 8.0f,
           "the first call did not count the 8 rows once");
  if (mode == "master") raise(SIGKILL);
  if (mode == "idle") std::this_thread::sleep_for(std::chrono::milliseconds(300));

  expect_error(v, mode == "body" ? "the call the worker died in" : "the call after the death",
               [&] { dist.call(step, {"x"}); }, ErrorCode::Remote, {named, "died"});
  expect_error(v, "a later call", [&] { dist.call(step, {"x"}); }, ErrorCode::InvalidUsage,
               {named, "died earlier"});
  const auto t0 = Clock::now();
  try {
    dist.close();  // the workers left serve() by themselves
  } catch (const std::exception& e) {
    v.expect(false, std::string("close() threw: ") + e.what());
  }
  v.expect(since(t0) < kBoundS, "close() took " + std::to_string(since(t0)) + " s");
  return v.report();
}
