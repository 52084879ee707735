// synk._time_all_reduce (bench_bindings.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace synk::python {

namespace py = pybind11;

void add_bench(py::module_& m);

}  // namespace synk::python
