// The smallest synk program: an average over the ranks, checked exactly.
#include <synk/synk.h>

#include <cstdio>
#include <vector>

int main() {
  synk::Communicator comm;
  std::vector<double> v(3, static_cast<double>(comm.rank() + 1));
  comm.all_reduce(v, synk::ReduceOp::avg);
  const double expected = (comm.size() + 1) / 2.0;
  const bool ok = v[0] == expected && v[2] == expected;
  std::printf("rank %d of %d: avg %g (%s), synk %s\n", comm.rank(), comm.size(), v[0],
              ok ? "ok" : "WRONG", SYNK_VERSION_STRING);
  return ok ? 0 : 1;
}
