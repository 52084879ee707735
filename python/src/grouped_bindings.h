// comm.grouped_all_reduce and comm.grouped_broadcast (grouped_bindings.cc).
#pragma once

#include <pybind11/pybind11.h>

#include "made_only.h"
#include "synk/communicator.h"

namespace synk::python {

namespace py = pybind11;

void add_grouped_calls(py::class_<Communicator>& cls);

}  // namespace synk::python
