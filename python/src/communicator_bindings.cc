// synk.Communicator: the world, or an adopted mpi4py communicator, and its collectives on NumPy
// arrays. Every call reads and writes the arrays' own memory (arrays.h) and releases the GIL
// while it runs, so other Python threads go on while a rank waits for the others.
#include "communicator_bindings.h"

#include <cstdint>
#include <optional>
#include <string>

#include <pybind11/stl.h>

#include "arrays.h"
#include "synk/communicator.h"
#include "synk/error.h"

namespace synk::python {
namespace {

using Array = std::optional<py::array>;
using Gil = py::gil_scoped_release;

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::InvalidArgument, message);
}

// MPI_Comm of an mpi4py communicator (Open MPI's is a pointer; mpi4py gives it as an int).
MPI_Comm handle_of(const py::object& mpi4py_comm) {
  const py::module_ mpi = py::module_::import("mpi4py.MPI");
  if (!py::isinstance(mpi4py_comm, mpi.attr("Comm"))) {
    invalid("Communicator(comm): comm must be an mpi4py communicator (mpi4py.MPI.Comm), not " +
            py::str(py::type::of(mpi4py_comm)).cast<std::string>());
  }
  if (mpi4py_comm.equal(mpi.attr("COMM_NULL"))) invalid("Communicator(comm): comm is COMM_NULL");
  const auto h = mpi.attr("_handleof")(mpi4py_comm).cast<std::uintptr_t>();
  return reinterpret_cast<MPI_Comm>(h);
}

Communicator make_communicator(const py::object& comm, const std::string& backend) {
  CommOptions options;
  options.backend = backend;
  if (comm.is_none()) {
    Gil gil;
    return Communicator(options);
  }
  const MPI_Comm handle = handle_of(comm);
  Gil gil;
  return Communicator(handle, options);
}

// `out` checked against the shape and dtype the result has, or a new array of them.
py::array result_array(const Array& out, const py::array& like,
                       const std::vector<py::ssize_t>& shape, const char* op) {
  if (!out) return new_array(like, shape);
  if (!out->dtype().is(like.dtype())) {
    invalid(std::string(op) + ": out has dtype " + py::str(out->dtype()).cast<std::string>() +
            " but the input has " + py::str(like.dtype()).cast<std::string>());
  }
  const std::vector<py::ssize_t> has(out->shape(), out->shape() + out->ndim());
  if (has != shape) {
    invalid(std::string(op) + ": out has shape " + py::str(py::tuple(py::cast(has))).cast<std::string>() +
            " but the result has shape " + py::str(py::tuple(py::cast(shape))).cast<std::string>());
  }
  return *out;
}

std::vector<py::ssize_t> with_leading(py::ssize_t n, const std::vector<py::ssize_t>& shape) {
  std::vector<py::ssize_t> s{n};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

void check_same_shape(const Buffer& a, const Buffer& out, const char* op) {
  if (a.shape != out.shape || a.dtype != out.dtype) {
    invalid(std::string(op) + ": out must have the input's shape and dtype");
  }
}

py::array all_reduce(Communicator& c, py::array a, const std::string& op, const Array& out,
                     const std::string& dtype) {
  const ReduceOp rop = reduce_op(op);
  const Buffer in = as_buffer(a, "a", !out, dtype);
  py::array target = out ? *out : a;
  const Buffer res = out ? as_buffer(*out, "out", true, dtype) : in;
  check_same_shape(in, res, "all_reduce");
  Gil gil;
  c.all_reduce(in.data, res.data, in.count, in.dtype, rop);
  return target;
}

py::object reduce(Communicator& c, py::array a, const std::string& op, int root,
                  const Array& out, const std::string& dtype) {
  const ReduceOp rop = reduce_op(op);
  const bool here = c.rank() == root;
  const Buffer in = as_buffer(a, "a", here && !out, dtype);
  const Buffer res = out && here ? as_buffer(*out, "out", true, dtype) : in;
  check_same_shape(in, res, "reduce");
  {
    Gil gil;
    c.reduce(in.data, here ? res.data : nullptr, in.count, in.dtype, rop, root);
  }
  if (!here) return py::none();
  return out ? *out : a;
}

py::array broadcast(Communicator& c, py::array a, int root, const std::string& dtype) {
  const Buffer b = as_buffer(a, "a", c.rank() != root, dtype);
  Gil gil;
  c.broadcast(b.data, b.count, b.dtype, root);
  return a;
}

py::array all_gather(Communicator& c, const py::array& a, const Array& out,
                     const std::string& dtype) {
  const Buffer in = as_buffer(a, "a", false, dtype);
  py::array r = result_array(out, a, with_leading(c.size(), in.shape), "all_gather");
  const Buffer res = as_buffer(r, "out", true, dtype);
  Gil gil;
  c.all_gather(in.data, res.data, in.count, in.dtype);
  return r;
}

py::object gather(Communicator& c, const py::array& a, int root, const Array& out,
                  const std::string& dtype) {
  const Buffer in = as_buffer(a, "a", false, dtype);
  std::optional<py::array> r;
  void* recv = nullptr;
  if (c.rank() == root) {
    r = result_array(out, a, with_leading(c.size(), in.shape), "gather");
    recv = as_buffer(*r, "out", true, dtype).data;
  }
  {
    Gil gil;
    c.gather(in.data, recv, in.count, in.dtype, root);
  }
  if (!r) return py::none();
  return *r;
}

// The root's a holds size() blocks along its first axis; every rank gets its block. Off the
// root a gives only the shape and dtype (or out does, with a None).
py::array scatter(Communicator& c, const std::optional<py::array>& a, int root, const Array& out,
                  const std::string& dtype) {
  const bool here = c.rank() == root;
  if (!a && (here || !out)) {
    invalid(here ? "scatter: the root must give a" : "scatter: give a (for its shape) or out");
  }
  if (!a) {
    const Buffer res = as_buffer(*out, "out", true, dtype);
    Gil gil;
    c.scatter(nullptr, res.data, res.count, res.dtype, root);
    return *out;
  }
  const Buffer in = as_buffer(*a, "a", false, dtype);
  if (in.shape.empty() || in.shape[0] != c.size()) {
    invalid("scatter: a's first axis must have one block per rank (" +
            std::to_string(c.size()) + ")");
  }
  const std::vector<py::ssize_t> block(in.shape.begin() + 1, in.shape.end());
  py::array r = result_array(out, *a, block, "scatter");
  const Buffer res = as_buffer(r, "out", true, dtype);
  Gil gil;
  c.scatter(here ? in.data : nullptr, res.data, res.count, in.dtype, root);
  return r;
}

py::array reduce_scatter(Communicator& c, const py::array& a, const std::string& op,
                         const Array& out, const std::string& dtype) {
  const ReduceOp rop = reduce_op(op);
  const Buffer in = as_buffer(a, "a", false, dtype);
  if (in.shape.empty() || in.shape[0] % c.size() != 0) {
    invalid("reduce_scatter: a's first axis must divide into one block per rank (" +
            std::to_string(c.size()) + ")");
  }
  std::vector<py::ssize_t> block = in.shape;
  block[0] /= c.size();
  py::array r = result_array(out, a, block, "reduce_scatter");
  const Buffer res = as_buffer(r, "out", true, dtype);
  Gil gil;
  c.reduce_scatter(in.data, res.data, res.count, in.dtype, rop);
  return r;
}

}  // namespace

void add_communicator(py::module_& m) {
  py::class_<Communicator>(m, "Communicator", "A group of ranks and the collectives they run.")
      .def(py::init(&make_communicator), py::arg("comm") = py::none(), py::arg("backend") = "",
           "Communicator(comm=None, backend=''): all ranks (comm None), or an mpi4py "
           "communicator adopted (synk works on its own duplicate). backend: auto, mpi, shm or "
           "nccl; '' reads SYNK_BACKEND.")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("size", &Communicator::size)
      .def_property_readonly("local_rank", &Communicator::local_rank)
      .def_property_readonly("local_size", &Communicator::local_size)
      .def_property_readonly("node", &Communicator::node)
      .def_property_readonly("num_nodes", &Communicator::num_nodes)
      .def_property_readonly("backend", &Communicator::backend)
      .def("split", [](const Communicator& c, int color, int key) {
             Gil gil;
             return c.split(color, key);
           }, py::arg("color"), py::arg("key") = 0)
      .def("barrier", [](Communicator& c) {
             Gil gil;
             c.barrier();
           })
      .def("all_reduce", &all_reduce, py::arg("a").noconvert(), py::arg("op") = "sum", py::kw_only(),
           py::arg("out") = py::none(), py::arg("dtype") = "")
      .def("reduce", &reduce, py::arg("a").noconvert(), py::arg("op") = "sum", py::arg("root") = 0,
           py::kw_only(), py::arg("out") = py::none(), py::arg("dtype") = "")
      .def("broadcast", &broadcast, py::arg("a").noconvert(), py::arg("root") = 0, py::kw_only(),
           py::arg("dtype") = "")
      .def("all_gather", &all_gather, py::arg("a").noconvert(), py::kw_only(), py::arg("out") = py::none(),
           py::arg("dtype") = "")
      .def("gather", &gather, py::arg("a").noconvert(), py::arg("root") = 0, py::kw_only(),
           py::arg("out") = py::none(), py::arg("dtype") = "")
      .def("scatter", &scatter, py::arg("a").noconvert(), py::arg("root") = 0, py::kw_only(),
           py::arg("out") = py::none(), py::arg("dtype") = "")
      .def("reduce_scatter", &reduce_scatter, py::arg("a").noconvert(), py::arg("op") = "sum", py::kw_only(),
           py::arg("out") = py::none(), py::arg("dtype") = "");
}

}  // namespace synk::python
