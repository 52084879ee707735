// The extension module synk._synk, which the package synk (python/synk/__init__.py) re-exports.
#include <pybind11/pybind11.h>

#include "arrays.h"
#include "bench_bindings.h"
#include "communicator_bindings.h"
#include "errors.h"
#include "key_value_bindings.h"
#include "model_bindings.h"
#include "no_gil.h"

PYBIND11_MODULE(_synk, m) {
  m.doc() = "synk's collectives on NumPy arrays (the C++ library libsynk, bound with pybind11)";
  m.attr("__version__") = SYNK_VERSION_TEXT;
  const pybind11::object main_thread = pybind11::module_::import("threading").attr("main_thread")();
  synk::python::main_thread_ident = main_thread.attr("ident").cast<unsigned long>();
  // In a child forked from another thread, that thread is the child's main one (synk/__init__.py
  // calls this after a fork).
  m.def("_note_main_thread", [] { synk::python::main_thread_ident = PyThread_get_thread_ident(); });
  synk::python::find_array_types();
  synk::python::add_errors(m);
  synk::python::add_communicator(m);
  synk::python::add_model(m);
  synk::python::add_key_value(m);
  synk::python::add_bench(m);
}
