// A master that ends by std::exit(0) between serve() and close(), its Distributed never closed
// nor destroyed: MPI_Finalize (from synk's exit handler) closes it, so the workers leave serve()
// and end too. Before, the workers waited for a request and the master in MPI_Finalize, for
// ever, whatever SYNK_TIMEOUT. Each worker prints "rank R: serve() returned"; the job must end
// with exit code 0 (a hang is ctest's TIMEOUT).
#include <cstdio>
#include <cstdlib>

#include "synk/synk.h"

int main() {
  synk::Communicator comm;  // synk starts MPI, and finalizes it at exit
  synk::Data<float> x(comm, {5, 1});
  x.set_value(comm.rank() == 0 ? std::vector<float>{1, 2, 3, 4, 5} : std::vector<float>{});
  synk::Function<float> total(comm, "total", {synk::Collect::sum},
                              [](const synk::SliceInputs<float>& in) {
                                float sum = 0;
                                for (std::size_t r = 0; r < in.rows; ++r) {
                                  sum += in.data[0].values[r];
                                }
                                return synk::Function<float>::Outputs{{sum}};
                              });
  synk::Distributed dist(comm);
  dist.add(total);
  dist.add("x", x);
  if (dist.serve()) {
    const float sum = dist.call(total, {"x"})[0][0];
    std::printf("rank 0: total %g\n", static_cast<double>(sum));
    std::fflush(stdout);
    std::exit(sum == 15.0f ? 0 : 1);
  }
  std::printf("rank %d: serve() returned\n", comm.rank());
  return 0;
}
