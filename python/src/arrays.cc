// See arrays.h.
#include "arrays.h"

#include <algorithm>
#include <bit>

#include "synk/error.h"

namespace synk::python {

void invalid(const std::string& message) { throw Error(ErrorCode::InvalidArgument, message); }

namespace {

std::string name_of(const py::dtype& dt) {
  return py::str(static_cast<py::object>(dt)).cast<std::string>();
}

// The synk type of a NumPy dtype: by kind and size, so that every platform name of a type
// (intc, int_, longlong...) maps where its bits belong.
DataType type_of(const py::dtype& dt, const char* what) {
  check_byte_order(dt, what);
  const char kind = dt.kind();
  const auto bytes = dt.itemsize();
  if (kind == 'i' && bytes == 1) return DataType::int8;
  if (kind == 'u' && bytes == 1) return DataType::uint8;
  if (kind == 'i' && bytes == 2) return DataType::int16;
  if (kind == 'u' && bytes == 2) return DataType::uint16;
  if (kind == 'i' && bytes == 4) return DataType::int32;
  if (kind == 'u' && bytes == 4) return DataType::uint32;
  if (kind == 'i' && bytes == 8) return DataType::int64;
  if (kind == 'u' && bytes == 8) return DataType::uint64;
  if (kind == 'f' && bytes == 2) return DataType::float16;
  if (kind == 'f' && bytes == 4) return DataType::float32;
  if (kind == 'f' && bytes == 8) return DataType::float64;
  invalid(std::string(what) + " has dtype " + name_of(dt) +
          ", which synk has no type for (bool, int8, uint8, int16, uint16, int32, uint32, "
          "int64, uint64, float16, float32, float64; bfloat16 as a uint16 array with "
          "dtype=\"bfloat16\")");
}

}  // namespace

// An array of the other byte order would be read as other numbers (NumPy gives a single byte's
// order as '|', and this machine's as '=': either is taken).
void check_byte_order(const py::dtype& dt, const char* what) {
  constexpr char kForeign = std::endian::native == std::endian::little ? '>' : '<';
  if (dt.byteorder() != kForeign) return;
  invalid(std::string(what) + " has dtype " + name_of(dt) +
          ", which is not in this machine's byte order: synk would read other numbers. Pass " +
          what + ".astype(" + what + ".dtype.newbyteorder('=')) and use what it returns");
}

namespace {

// numpy.ndarray and numpy.ma.MaskedArray, found when the module is imported (an import inside a
// call could hand the GIL to another thread while a static's guard is held), and kept for the
// process's life (released: no destructor after the interpreter is gone).
PyObject* ndarray_type = nullptr;
PyObject* masked_array_type = nullptr;

}  // namespace

void find_array_types() {
  ndarray_type = py::object(py::module_::import("numpy").attr("ndarray")).release().ptr();
  masked_array_type =
      py::object(py::module_::import("numpy.ma").attr("MaskedArray")).release().ptr();
}

// A masked array's mask would be dropped: synk reduces, sends and writes its data, masked
// values included (they were summed, and the mask kept). Looked for only past a plain ndarray.
void refuse_masked(const py::array& a, const char* what) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(a.ptr())) == ndarray_type) return;
  if (masked_array_type == nullptr) return;
  const int is_masked = PyObject_IsInstance(a.ptr(), masked_array_type);
  if (is_masked < 0) throw py::error_already_set();
  if (is_masked == 0) return;
  invalid(std::string(what) + " is a masked array: synk would use its data, masked values "
                              "included, and drop the mask; pass " +
          what + ".filled(value) (or " + what + ".data) and use what it returns");
}

Buffer as_buffer(const py::array& a, const char* what, bool writable,
                 const std::string& dtype_name) {
  refuse_masked(a, what);
  if (!(a.flags() & py::array::c_style)) {
    const bool fortran = (a.flags() & py::array::f_style) != 0;
    invalid(std::string(what) + " is not C-contiguous (" +
            (fortran ? "it is in Fortran order, a transpose?" : "a strided view?") +
            "): synk reads and writes the array's own memory in C order; pass "
            "numpy.ascontiguousarray(" + what + ") and use what it returns");
  }
  if (writable && !a.writeable()) {
    invalid(std::string(what) + " is read-only, and synk writes the result into it");
  }
  Buffer b;
  if (dtype_name.empty() && a.dtype().kind() == 'b') {
    b.dtype = DataType::uint8;
    b.logical = true;
  } else if (dtype_name.empty()) {
    b.dtype = type_of(a.dtype(), what);
  } else if (dtype_name == "bfloat16") {
    if (a.dtype().kind() != 'u' || a.dtype().itemsize() != 2) {
      invalid(std::string(what) + ": dtype=\"bfloat16\" reads a uint16 array's bits as bfloat16; "
                                  "this array is not uint16");
    }
    check_byte_order(a.dtype(), what);
    b.dtype = DataType::bfloat16;
  } else {
    invalid("dtype=\"" + dtype_name + "\": the only override is \"bfloat16\" (of a uint16 array)");
  }
  // Both are the array's own memory; mutable_data() only checks the flag tested above.
  b.data = writable ? py::array(a).mutable_data() : const_cast<void*>(a.data());
  b.count = static_cast<std::size_t>(a.size());
  b.shape = {a.shape(), static_cast<std::size_t>(a.ndim())};
  return b;
}

void check_same_shape(const Buffer& a, const Buffer& out, const char* op) {
  const auto text = [](std::span<const py::ssize_t> shape) {
    std::string t = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (i > 0) t += ", ";
      t += std::to_string(shape[i]);
    }
    return t + (shape.size() == 1 ? ",)" : ")");
  };
  if (a.dtype != out.dtype || a.logical != out.logical) {
    invalid(std::string(op) + ": out has dtype " + dtype_text(out) + " but the input has " +
            dtype_text(a));
  }
  if (!std::ranges::equal(a.shape, out.shape)) {
    invalid(std::string(op) + ": out has shape " + text(out.shape) +
            " but the input has shape " + text(a.shape));
  }
}

std::vector<py::ssize_t> shape_of(const py::array& a) {
  return std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim());
}

Buffer reduction_out(const py::array& out, const py::array& a, const Buffer& in, const char* op,
                     const std::string& dtype, py::array& scratch, std::optional<Error>& error) {
  try {
    const Buffer res = as_buffer(out, "out", true, dtype);
    check_same_shape(in, res, op);
    return res;
  } catch (const Error& e) {
    error = e;
  }
  scratch = py::array(a.dtype(), shape_of(a));
  return as_buffer(scratch, "out", true, dtype);
}

Buffer read_only_scratch(const py::array& a, const char* op, const std::string& dtype,
                         py::array& scratch, std::optional<Error>& error) {
  error = Error(ErrorCode::InvalidArgument,
                std::string(op) + ": a is read-only, and synk writes the result into it");
  scratch = py::array(a.dtype(), shape_of(a));
  return as_buffer(scratch, "a", true, dtype);
}

const char* dtype_text(const Buffer& b) { return b.logical ? "bool" : to_string(b.dtype); }

ReduceOp op_for(ReduceOp op, const Buffer& in, const char* call) {
  if (!in.logical) return op;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::max: return ReduceOp::max;
    case ReduceOp::prod:
    case ReduceOp::min: return ReduceOp::min;
    case ReduceOp::avg: break;
  }
  invalid(std::string(call) + ": avg of a bool array has no meaning here: sum and max are its "
                              "logical or, prod and min its logical and");
}

ReduceOp reduce_op(const std::string& name) {
  if (const auto op = parse_reduce_op(name)) return *op;
  invalid("op=\"" + name + "\" is not one of sum, prod, min, max, avg (also product, mean, "
          "average)");
}

}  // namespace synk::python
