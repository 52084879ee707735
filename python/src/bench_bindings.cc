// synk._time_all_reduce: the C++ call timed in a C++ loop, in the Python process itself, so
// that benchmarks/bench_python.py compares the binding with the call it wraps on the same
// communicator, the same arrays and the same choices of the shm backend (made by measurement
// in each process).
#include "bench_bindings.h"

#include <chrono>

#include "arrays.h"
#include "no_gil.h"
#include "made_only.h"
#include "synk/communicator.h"

namespace synk::python {

void add_bench(py::module_& m) {
  m.def(
      "_time_all_reduce",
      [](Communicator& c, const py::array& a, py::array& out, int calls) {
        const Buffer in = as_buffer(a, "a", false);
        const Buffer res = as_buffer(out, "out", true);
        check_same_shape(in, res, "_time_all_reduce");
        if (calls < 1) invalid("calls must be at least 1");
        const NoGil released;
        c.barrier();
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) c.all_reduce(in.data, res.data, in.count, in.dtype, ReduceOp::sum);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        return took.count() / calls;
      },
      py::arg("comm"), py::arg("a").noconvert(), py::arg("out").noconvert(), py::arg("calls"),
      "Seconds per call of the C++ all_reduce (sum) of a into out, over `calls` calls in a C++ "
      "loop after a barrier (for benchmarks/bench_python.py).");
}

}  // namespace synk::python
