// synk.Error and its subclasses (errors.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace synk::python {

namespace py = pybind11;

// Adds synk.Error, synk.InvalidArgument, ... to `m` and translates every synk::Error that
// leaves a bound function into the class of its code.
void add_errors(py::module_& m);

}  // namespace synk::python
