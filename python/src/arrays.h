// NumPy arrays as synk buffers, without a copy: the dtype a synk DataType, the memory the
// array's own (C-contiguous, writable where synk writes). Anything else is a synk
// InvalidArgument naming the argument, never a silent copy.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "synk/error.h"
#include "synk/types.h"

namespace synk::python {

namespace py = pybind11;

// An array's memory as synk sees it.
struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;  // elements
  DataType dtype = DataType::float32;
  std::span<const py::ssize_t> shape;  // the array's own (valid while the array lives)
  bool logical = false;  // a NumPy bool array, which synk moves and reduces as uint8
};

// "bool" for a bool array, else the DataType's name.
const char* dtype_text(const Buffer& b);
// The reduction of `in` that `op` names: a bool array's 0s and 1s reduce as uint8, so that sum
// and max are its logical or and prod and min its logical and (NumPy's add and multiply of
// bools); avg of bools is an InvalidArgument naming `call`.
ReduceOp op_for(ReduceOp op, const Buffer& in, const char* call);

// `dtype_name` "" takes the array's own dtype; "bfloat16" reads a uint16 array as bfloat16.
// `what` names the argument in messages ("a", "out"). `writable`: synk writes into it.
Buffer as_buffer(const py::array& a, const char* what, bool writable,
                 const std::string& dtype_name = "");

// InvalidArgument naming `what` where `dt` is not in this machine's byte order, in which synk
// reads every array (as_buffer checks it; a single-byte type has none).
void check_byte_order(const py::dtype& dt, const char* what);
// Finds NumPy's array types, for as_buffer's refusal of a masked array: once, at import.
void find_array_types();

// InvalidArgument "<op>: out has shape (4,) but the input has shape (3,)" (or dtype) unless
// they match.
void check_same_shape(const Buffer& a, const Buffer& out, const char* op);

std::vector<py::ssize_t> shape_of(const py::array& a);

// The buffer a reduction of `in` (read from `a`) writes: out's, where out has in's shape and
// dtype. Where it does not, a new array like a, kept in `scratch`, and out's error in `error`,
// to raise once the call has ended: the rank still takes part, so that the others neither wait
// for it nor pair its next call with this one (agreeing first would cost every call a
// collective).
Buffer reduction_out(const py::array& out, const py::array& a, const Buffer& in, const char* op,
                     const std::string& dtype, py::array& scratch, std::optional<Error>& error);

// The result of a rank that writes it into `a`, which is read-only there: a new array like a,
// kept in `scratch`, and the error in `error`, raised once the call has ended (as for an out
// that does not fit: a read-only `a` on some ranks only must not leave them out of the call).
Buffer read_only_scratch(const py::array& a, const char* op, const std::string& dtype,
                         py::array& scratch, std::optional<Error>& error);

// Throws synk's InvalidArgument with `message` (raised in Python as synk.InvalidArgument).
[[noreturn]] void invalid(const std::string& message);

// The reduction named "sum", "prod", "min", "max", "avg" (or "mean"), as parse_reduce_op
// reads it; another name is an InvalidArgument.
ReduceOp reduce_op(const std::string& name);

}  // namespace synk::python
