// comm.all_reduce entered through CPython's fast calling convention (METH_FASTCALL |
// METH_KEYWORDS) instead of pybind11's dispatcher: the call a training loop makes every step,
// where matching keywords and running casters cost more than the C++ call itself on small
// arrays (docs/measurements.md, the Python binding). The same arguments, checks and errors as
// the other collectives (arrays.h); iall_reduce stays with them.
#include "all_reduce_fast.h"

#include <optional>
#include <string>
#include <utility>

#include "arrays.h"
#include "no_gil.h"
#include "errors.h"
#include "made_only.h"
#include "synk/communicator.h"
#include "synk/error.h"

namespace synk::python {
namespace {

struct Arguments {
  PyObject* a = nullptr;
  PyObject* op = nullptr;
  PyObject* out = nullptr;
  PyObject* dtype = nullptr;
};

// all_reduce(a, op="sum", *, out=None, dtype=""): a and op by position or name, out and dtype
// by name. False with a TypeError set where they do not fit.
bool parse(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Arguments& got) {
  static const char* const kNames[] = {"a", "op", "out", "dtype"};
  PyObject** slots[] = {&got.a, &got.op, &got.out, &got.dtype};
  if (nargs > 2) {
    PyErr_Format(PyExc_TypeError, "all_reduce() takes at most 2 positional arguments (a, op), "
                                  "%zd given", nargs);
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) *slots[i] = args[i];
  const Py_ssize_t keywords = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < keywords; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
    int i = 0;
    while (i < 4 && PyUnicode_CompareWithASCIIString(name, kNames[i]) != 0) ++i;
    if (i == 4) {
      PyErr_Format(PyExc_TypeError, "all_reduce() got an unexpected keyword argument '%U'", name);
      return false;
    }
    if (*slots[i]) {
      PyErr_Format(PyExc_TypeError, "all_reduce() got multiple values for argument '%s'", kNames[i]);
      return false;
    }
    *slots[i] = args[nargs + k];
  }
  if (!got.a) {
    PyErr_SetString(PyExc_TypeError, "all_reduce() missing required argument 'a'");
    return false;
  }
  return true;
}

std::string text(PyObject* o, const char* name, const char* absent) {
  if (!o) return absent;
  if (!PyUnicode_Check(o)) throw py::type_error(std::string("all_reduce(): ") + name + " must be a str");
  Py_ssize_t size = 0;
  const char* p = PyUnicode_AsUTF8AndSize(o, &size);
  if (!p) throw py::error_already_set();
  return std::string(p, static_cast<std::size_t>(size));
}

// An ndarray as it is: anything else is a TypeError, never a silent copy into a temporary.
py::array array(PyObject* o, const char* name) {
  if (!py::isinstance<py::array>(o)) {
    throw py::type_error(std::string("all_reduce(): ") + name + " must be a numpy.ndarray, not " +
                         Py_TYPE(o)->tp_name);
  }
  return py::reinterpret_borrow<py::array>(o);
}

Communicator& communicator(PyObject* self) {
  auto vh = reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder();
  if (!vh.holder_constructed()) throw_never_made(self);
  return *static_cast<Communicator*>(vh.value_ptr());
}

// The op: the usual names compared as they are, any other spelling parsed (as reduce_op does,
// which lowers the case first: a tenth of the call's cost).
ReduceOp op_of(PyObject* op) {
  if (!op) return ReduceOp::sum;
  static constexpr std::pair<const char*, ReduceOp> kUsual[] = {
      {"sum", ReduceOp::sum}, {"avg", ReduceOp::avg}, {"max", ReduceOp::max},
      {"min", ReduceOp::min}, {"prod", ReduceOp::prod}};
  if (PyUnicode_Check(op)) {
    for (const auto& [name, value] : kUsual) {
      if (PyUnicode_CompareWithASCIIString(op, name) == 0) return value;
    }
  }
  return reduce_op(text(op, "op", "sum"));
}

// The result: `out` where given, else a itself, reduced in place. An out that does not fit, or
// a read-only a, is raised once the call has ended, this rank taking part into a new array.
PyObject* reduce_now(PyObject* self, const Arguments& got) {
  Communicator& c = communicator(self);
  const ReduceOp named = op_of(got.op);
  const std::string dtype = got.dtype ? text(got.dtype, "dtype", "") : std::string();
  const bool has_out = got.out && got.out != Py_None;
  const py::array a = array(got.a, "a");
  const Buffer in = as_buffer(a, "a", false, dtype);
  const ReduceOp op = op_for(named, in, "all_reduce");
  Buffer res = in;
  std::optional<Error> out_error;
  py::array scratch;
  if (has_out) {
    res = reduction_out(array(got.out, "out"), a, in, "all_reduce", dtype, scratch, out_error);
  } else if (!a.writeable()) {
    res = read_only_scratch(a, "all_reduce", dtype, scratch, out_error);
  }
  without_gil([&] { c.all_reduce(in.data, res.data, in.count, in.dtype, op); });
  if (out_error) throw *out_error;
  PyObject* result = has_out ? got.out : got.a;
  Py_INCREF(result);
  return result;
}

PyObject* all_reduce(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  Arguments got;
  if (!parse(args, nargs, kwnames, got)) return nullptr;
  try {
    return reduce_now(self, got);
  } catch (const Error& e) {
    set_python_error(e);
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyMethodDef all_reduce_def = {
    "all_reduce", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&all_reduce)),
    METH_FASTCALL | METH_KEYWORDS,
    "all_reduce($self, a, op='sum', *, out=None, dtype='')\n--\n\n"
    "The reduction over the ranks of a, in a (or out), which it returns. op: sum, prod, min, max "
    "or avg. The GIL is released while it runs."};

}  // namespace

void add_fast_all_reduce(py::object& cls) {
  PyObject* descr = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &all_reduce_def);
  if (!descr) throw py::error_already_set();
  cls.attr("all_reduce") = py::reinterpret_steal<py::object>(descr);
}

}  // namespace synk::python
