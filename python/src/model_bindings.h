// synk._DataStore and synk._RequestChannel (model_bindings.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace synk::python {

namespace py = pybind11;

void add_model(py::module_& m);

}  // namespace synk::python
