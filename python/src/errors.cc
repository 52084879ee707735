// synk.Error and one subclass per synk::ErrorCode, and the translation of a C++ synk::Error
// into them. InvalidArgument is also a ValueError and Timeout a TimeoutError, so that code
// catching Python's own classes catches them too.
#include "errors.h"

#include <array>

#include "synk/error.h"

namespace synk::python {
namespace {

constexpr std::array<ErrorCode, 7> kCodes = {
    ErrorCode::InvalidArgument, ErrorCode::InvalidUsage, ErrorCode::NotSupported,
    ErrorCode::System,          ErrorCode::Backend,      ErrorCode::Timeout,
    ErrorCode::Remote};

// The classes, made once per process (a module is initialised once).
std::array<PyObject*, kCodes.size()>& classes() {
  static std::array<PyObject*, kCodes.size()> c{};
  return c;
}

PyObject* class_of(ErrorCode code) {
  for (std::size_t i = 0; i < kCodes.size(); ++i) {
    if (kCodes[i] == code) return classes()[i];
  }
  return classes()[0];
}

}  // namespace

void add_errors(py::module_& m) {
  PyObject* base = PyErr_NewExceptionWithDoc(
      "synk.Error", "A synk call failed; the subclass says how, the message says what.",
      PyExc_RuntimeError, nullptr);
  m.attr("Error") = py::reinterpret_steal<py::object>(base);
  for (std::size_t i = 0; i < kCodes.size(); ++i) {
    const std::string name = to_string(kCodes[i]);
    py::tuple bases;
    if (kCodes[i] == ErrorCode::InvalidArgument) {
      bases = py::make_tuple(m.attr("Error"), py::handle(PyExc_ValueError));
    } else if (kCodes[i] == ErrorCode::Timeout) {
      bases = py::make_tuple(m.attr("Error"), py::handle(PyExc_TimeoutError));
    } else {
      bases = py::make_tuple(m.attr("Error"));
    }
    PyObject* cls = PyErr_NewException(("synk." + name).c_str(), bases.ptr(), nullptr);
    classes()[i] = cls;
    m.attr(name.c_str()) = py::reinterpret_borrow<py::object>(cls);
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      set_python_error(e);
    }
  });
}

void set_python_error(const Error& e) { PyErr_SetString(class_of(e.code()), e.what()); }

}  // namespace synk::python
