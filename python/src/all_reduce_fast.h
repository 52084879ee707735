// comm.all_reduce through CPython's fast calling convention (all_reduce_fast.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace synk::python {

namespace py = pybind11;

// Replaces the class's all_reduce (bound by pybind11) with the fast entry point.
void add_fast_all_reduce(py::object& cls);

}  // namespace synk::python
