// comm.all_reduce through CPython's fast calling convention (all_reduce_fast.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace synk::python {

namespace py = pybind11;

// Adds the class's blocking all_reduce: the fast entry point (iall_reduce is pybind11's).
void add_fast_all_reduce(py::object& cls);

}  // namespace synk::python
