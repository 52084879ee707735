// synk.Error and its subclasses (errors.cc).
#pragma once

#include <pybind11/pybind11.h>

#include "synk/error.h"

namespace synk::python {

namespace py = pybind11;

// Adds synk.Error, synk.InvalidArgument, ... to `m` and translates every synk::Error that
// leaves a bound function into the class of its code.
void add_errors(py::module_& m);

// Sets the Python exception of e's class, as the translator does (for entry points that
// bypass pybind11's dispatcher).
void set_python_error(const Error& e);

}  // namespace synk::python
