// synk.KeyValue and synk.Updater (key_value_bindings.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace synk::python {

namespace py = pybind11;

void add_key_value(py::module_& m);

}  // namespace synk::python
