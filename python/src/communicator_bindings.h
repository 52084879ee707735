// synk.Communicator (communicator_bindings.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace synk::python {

namespace py = pybind11;

void add_communicator(py::module_& m);

}  // namespace synk::python
