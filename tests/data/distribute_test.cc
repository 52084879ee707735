// Master-driven mode under mpiexec: the master's serial program drives Function calls and
// Shared collectives on every rank; a body that throws on a worker reaches the master naming
// that rank, and the workers keep serving until close().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "../multirank/mpi_test.h"
#include "synk/distribute.h"

namespace synk {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using synk_test::caught;
using synk_test::message;
using synk_test::world;

TEST(Distribute, TheWalkthroughDrivenByTheMaster) {
  Communicator& comm = world();
  const int n = comm.size();
  Shared<float> s(comm, "s", {1, 1});
  Data<float> x(comm, {4, 2});
  x.set_value(comm.rank() == 0 ? std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4} : std::vector<float>{});
  int calls_here = 0;
  Function<float> update(comm, "update", {Collect::sum}, [&](const SliceInputs<float>& in) {
    ++calls_here;
    std::vector<float> next(2, 0.0f);
    for (std::size_t r = 0; r < in.rows; ++r) {
      for (std::size_t c = 0; c < 2; ++c) next[c] += in.data[0].values[r * 2 + c] * s.value()[c];
    }
    s.value() = next;
    return Function<float>::Outputs{{static_cast<float>(in.rows)}};
  });
  Function<float> fragile(comm, "fragile", {Collect::avg}, [&](const SliceInputs<float>&) {
    if (comm.rank() == n - 1 && n > 1) throw std::runtime_error("worker disk full");
    return Function<float>::Outputs{{1.0f}};
  });

  Distributed<float> dist(comm);
  dist.add(update);
  dist.add(fragile);
  dist.add("x", x);
  dist.add(s);
  if (dist.serve()) {  // the master's serial program; workers are inside serve() meanwhile
    const auto rows = dist.call("update", {"x"});
    EXPECT_THAT(rows[0], ElementsAre(4.0f));  // every row once, summed over the ranks
    dist.all_reduce("s", ReduceOp::sum);
    EXPECT_THAT(s.value(), ElementsAre(10.0f, 10.0f));  // colsum(x) whatever the split
    const std::vector<float> all = dist.gather("s");
    EXPECT_EQ(all, std::vector<float>(static_cast<std::size_t>(2 * n), 10.0f));
    if (n > 1) {
      const auto e = caught([&] { dist.call("fragile", {"x"}); });
      EXPECT_SYNK_ERROR(e, ErrorCode::Remote);
      EXPECT_THAT(message(e), HasSubstr("Function 'fragile': rank " + std::to_string(n - 1) +
                                        " failed: worker disk full"));
    }
    // The job is still usable: a call on an index batch, sliced.
    s.set_local({1, 1});
    dist.broadcast("s");
    const auto again = dist.call("update", {"x"}, {}, Batch::indices({3, 2, 1}), 2);
    EXPECT_THAT(again[0], ElementsAre(3.0f));
    dist.close();
  }
  // Every rank took part: the workers ran their shares too.
  int total = 0;
  MPI_Allreduce(&calls_here, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(total, 3 * n);  // first call: 1 slice per rank; last call: 2 slices per rank
}

}  // namespace
}  // namespace synk
