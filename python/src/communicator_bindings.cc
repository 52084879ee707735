// synk.Communicator: the world, or an adopted mpi4py communicator, and its collectives on NumPy
// arrays. Every call reads and writes the arrays' own memory (arrays.h) and releases the GIL
// while it runs, so other Python threads go on while a rank waits for the others.
#include "communicator_bindings.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <pybind11/stl.h>

#include "all_reduce_fast.h"
#include "arrays.h"
#include "synk/communicator.h"
#include "synk/error.h"
#include "synk/request.h"

namespace synk::python {
namespace {

using Array = std::optional<py::array>;
using NoGil = py::gil_scoped_release;  // `NoGil released;`: the GIL is free in its scope

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
    NoGil released;
    return Communicator(options);
  }
  const MPI_Comm handle = handle_of(comm);
  NoGil released;
  return Communicator(handle, options);
}

// `out` checked against the shape and dtype the result has, or a new C-contiguous array of
// them (the dtype of `like`: a uint16 array for bfloat16).
py::array result_array(const Array& out, const py::array& like,
                       const std::vector<py::ssize_t>& shape, const char* op) {
  if (!out) return py::array(like.dtype(), shape);
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

std::vector<py::ssize_t> with_leading(py::ssize_t n, std::span<const py::ssize_t> shape) {
  std::vector<py::ssize_t> s{n};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

// A collective with its arguments checked: which one, its C++ arguments, what it returns, and
// the array it reads, which a started call keeps alive until it ends. Plain data, so that a
// blocking call costs no allocation beyond its result.
struct Call {
  enum class Kind { all_reduce, reduce, broadcast, all_gather, gather, scatter, reduce_scatter,
                    gatherv, scatterv };
  Kind kind = Kind::all_reduce;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;  // the send count; the receive count of scatter(v) and reduce_scatter
  DataType dtype = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  std::shared_ptr<const std::vector<std::size_t>> counts{};  // gatherv's and scatterv's
  py::object result{};
  py::object input{};
};

void run_call(Communicator& c, const Call& k) {
  using K = Call::Kind;
  switch (k.kind) {
    case K::all_reduce: return c.all_reduce(k.send, k.recv, k.count, k.dtype, k.op);
    case K::reduce: return c.reduce(k.send, k.recv, k.count, k.dtype, k.op, k.root);
    case K::broadcast: return c.broadcast(k.recv, k.count, k.dtype, k.root);
    case K::all_gather: return c.all_gather(k.send, k.recv, k.count, k.dtype);
    case K::gather: return c.gather(k.send, k.recv, k.count, k.dtype, k.root);
    case K::scatter: return c.scatter(k.send, k.recv, k.count, k.dtype, k.root);
    case K::reduce_scatter: return c.reduce_scatter(k.send, k.recv, k.count, k.dtype, k.op);
    case K::gatherv: return c.gatherv(k.send, k.count, k.recv, *k.counts, k.dtype, k.root);
    case K::scatterv: return c.scatterv(k.send, *k.counts, k.recv, k.count, k.dtype, k.root);
  }
}

Request start_call(Communicator& c, const Call& k) {
  using K = Call::Kind;
  switch (k.kind) {
    case K::all_reduce: return c.iall_reduce(k.send, k.recv, k.count, k.dtype, k.op);
    case K::reduce: return c.ireduce(k.send, k.recv, k.count, k.dtype, k.op, k.root);
    case K::broadcast: return c.ibroadcast(k.recv, k.count, k.dtype, k.root);
    case K::all_gather: return c.iall_gather(k.send, k.recv, k.count, k.dtype);
    case K::gather: return c.igather(k.send, k.recv, k.count, k.dtype, k.root);
    case K::scatter: return c.iscatter(k.send, k.recv, k.count, k.dtype, k.root);
    case K::reduce_scatter: return c.ireduce_scatter(k.send, k.recv, k.count, k.dtype, k.op);
    case K::gatherv: return c.igatherv(k.send, k.count, k.recv, *k.counts, k.dtype, k.root);
    case K::scatterv: return c.iscatterv(k.send, *k.counts, k.recv, k.count, k.dtype, k.root);
  }
  return {};
}

Call all_reduce(Communicator& c, const py::array& a, const std::string& op, const Array& out,
                const std::string& dtype) {
  const ReduceOp rop = reduce_op(op);
  const Buffer in = as_buffer(a, "a", !out, dtype);
  const Buffer res = out ? as_buffer(*out, "out", true, dtype) : in;
  check_same_shape(in, res, "all_reduce");
  return {.kind = Call::Kind::all_reduce, .send = in.data, .recv = res.data, .count = in.count,
          .dtype = in.dtype, .op = rop, .result = out ? *out : a, .input = a};
}

Call reduce(Communicator& c, const py::array& a, const std::string& op, int root,
            const Array& out, const std::string& dtype) {
  const ReduceOp rop = reduce_op(op);
  const bool here = c.rank() == root;
  const Buffer in = as_buffer(a, "a", here && !out, dtype);
  const Buffer res = out && here ? as_buffer(*out, "out", true, dtype) : in;
  check_same_shape(in, res, "reduce");
  void* recv = here ? res.data : nullptr;
  return {.kind = Call::Kind::reduce, .send = in.data, .recv = recv, .count = in.count,
          .dtype = in.dtype, .op = rop, .root = root,
          .result = here ? py::object(out ? *out : a) : py::none(), .input = a};
}

Call broadcast(Communicator& c, const py::array& a, int root, const std::string& dtype) {
  const Buffer b = as_buffer(a, "a", c.rank() != root, dtype);
  return {.kind = Call::Kind::broadcast, .recv = b.data, .count = b.count, .dtype = b.dtype,
          .root = root, .result = a, .input = a};
}

Call all_gather(Communicator& c, const py::array& a, const Array& out, const std::string& dtype) {
  const Buffer in = as_buffer(a, "a", false, dtype);
  py::array r = result_array(out, a, with_leading(c.size(), in.shape), "all_gather");
  const Buffer res = as_buffer(r, "out", true, dtype);
  return {.kind = Call::Kind::all_gather, .send = in.data, .recv = res.data, .count = in.count,
          .dtype = in.dtype, .result = r, .input = a};
}

Call gather(Communicator& c, const py::array& a, int root, const Array& out,
            const std::string& dtype) {
  const Buffer in = as_buffer(a, "a", false, dtype);
  py::object r = py::none();
  void* recv = nullptr;
  if (c.rank() == root) {
    py::array arr = result_array(out, a, with_leading(c.size(), in.shape), "gather");
    recv = as_buffer(arr, "out", true, dtype).data;
    r = arr;
  }
  return {.kind = Call::Kind::gather, .send = in.data, .recv = recv, .count = in.count,
          .dtype = in.dtype, .root = root, .result = r, .input = a};
}

// The root's a holds size() blocks along its first axis; every rank gets its block. Off the
// root a gives only the shape and dtype (or out does, with a None).
Call scatter(Communicator& c, const std::optional<py::array>& a, int root, const Array& out,
             const std::string& dtype) {
  const bool here = c.rank() == root;
  if (!a && (here || !out)) {
    invalid(here ? "scatter: the root must give a" : "scatter: give a (for its shape) or out");
  }
  const void* send = nullptr;
  py::array r;
  if (a) {
    const Buffer in = as_buffer(*a, "a", false, dtype);
    if (in.shape.empty() || in.shape[0] != c.size()) {
      invalid("scatter: a's first axis must have one block per rank (" +
              std::to_string(c.size()) + ")");
    }
    const std::vector<py::ssize_t> block(in.shape.begin() + 1, in.shape.end());
    r = result_array(out, *a, block, "scatter");
    if (here) send = in.data;
  } else {
    r = *out;
  }
  const Buffer res = as_buffer(r, "out", true, dtype);
  return {.kind = Call::Kind::scatter, .send = send, .recv = res.data, .count = res.count,
          .dtype = res.dtype, .root = root, .result = r,
          .input = a ? py::object(*a) : py::none()};
}

Call reduce_scatter(Communicator& c, const py::array& a, const std::string& op, const Array& out,
                    const std::string& dtype) {
  const ReduceOp rop = reduce_op(op);
  const Buffer in = as_buffer(a, "a", false, dtype);
  if (in.shape.empty() || in.shape[0] % c.size() != 0) {
    invalid("reduce_scatter: a's first axis must divide into one block per rank (" +
            std::to_string(c.size()) + ")");
  }
  std::vector<py::ssize_t> block(in.shape.begin(), in.shape.end());
  block[0] /= c.size();
  py::array r = result_array(out, a, block, "reduce_scatter");
  const Buffer res = as_buffer(r, "out", true, dtype);
  return {.kind = Call::Kind::reduce_scatter, .send = in.data, .recv = res.data,
          .count = res.count, .dtype = in.dtype, .op = rop, .result = r, .input = a};
}

// The elements in one row of a (all of a 0-d or 1-d array's first axis counts as rows of 1).
std::size_t row_elems(const Buffer& b) {
  std::size_t n = 1;
  for (std::size_t i = 1; i < b.shape.size(); ++i) n *= static_cast<std::size_t>(b.shape[i]);
  return n;
}

// Every rank's rows and row size, by an all_gather (so every rank can check them alike).
std::vector<std::int64_t> rows_of_all(Communicator& c, std::int64_t rows, std::int64_t row) {
  const std::int64_t mine[2] = {rows, row};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(c.size()));
  NoGil released;
  c.all_gather(mine, all.data(), 2, DataType::int64);
  return all;
}

// Each rank's a holds rows of the same trailing shape, as many as it likes; the root gets them
// all, in rank order, along the first axis. (The row counts go first, by an all_gather.)
Call gatherv(Communicator& c, const py::array& a, int root, const Array& out,
             const std::string& dtype) {
  const Buffer in = as_buffer(a, "a", false, dtype);
  if (in.shape.empty()) invalid("gatherv: a needs a first axis (its rows)");
  const std::size_t row = row_elems(in);
  const std::vector<std::int64_t> all = rows_of_all(c, in.shape[0], static_cast<std::int64_t>(row));
  auto counts = std::make_shared<std::vector<std::size_t>>();
  py::ssize_t total_rows = 0;
  for (int r = 0; r < c.size(); ++r) {
    if (all[2 * r + 1] != static_cast<std::int64_t>(row)) {
      invalid("gatherv: rank " + std::to_string(r) + "'s rows have " +
              std::to_string(all[2 * r + 1]) + " elements, this rank's " + std::to_string(row));
    }
    counts->push_back(static_cast<std::size_t>(all[2 * r]) * row);
    total_rows += all[2 * r];
  }
  py::object r = py::none();
  void* recv = nullptr;
  if (c.rank() == root) {
    std::vector<py::ssize_t> shape(in.shape.begin(), in.shape.end());
    shape[0] = total_rows;
    py::array arr = result_array(out, a, shape, "gatherv");
    recv = as_buffer(arr, "out", true, dtype).data;
    r = arr;
  }
  return {.kind = Call::Kind::gatherv, .send = in.data, .recv = recv, .count = in.count,
          .dtype = in.dtype, .root = root, .counts = counts, .result = r, .input = a};
}

// What the ranks agree on before a scatterv: every rank's row size, and the root's counts and
// whether its a holds them, all_gathered so that every rank refuses what is wrong alike.
struct ScattervPlan {
  std::vector<std::int64_t> rows;  // the root's counts
  std::vector<std::int64_t> row_elems;
  std::string root_error;
};

ScattervPlan agree_on_scatterv(Communicator& c, const Buffer& in, int root,
                               const std::optional<std::vector<std::int64_t>>& counts) {
  const auto n = static_cast<std::size_t>(c.size());
  std::vector<std::int64_t> mine(n + 2, 0);
  mine[0] = static_cast<std::int64_t>(row_elems(in));
  if (c.rank() == root) {
    std::int64_t sum = 0;
    const bool fits = counts && counts->size() == n;
    for (std::size_t r = 0; fits && r < n; ++r) {
      mine[r + 2] = (*counts)[r];
      sum += (*counts)[r] < 0 ? -(1LL << 62) : (*counts)[r];
    }
    mine[1] = fits && sum == in.shape[0] ? 1 : 0;
  }
  std::vector<std::int64_t> all(n * (n + 2));
  {
    NoGil released;
    c.all_gather(mine.data(), all.data(), n + 2, DataType::int64);
  }
  ScattervPlan plan;
  const std::int64_t* at_root = all.data() + static_cast<std::size_t>(root) * (n + 2);
  plan.rows.assign(at_root + 2, at_root + 2 + n);
  for (std::size_t r = 0; r < n; ++r) plan.row_elems.push_back(all[r * (n + 2)]);
  if (at_root[1] == 0) {
    plan.root_error = "scatterv: the root's counts must give each of the " + std::to_string(n) +
                      " ranks its rows (none negative), summing to the rows of its a";
  }
  return plan;
}

// The root's a holds every rank's rows, counts[r] for rank r, one after another; each rank gets
// its rows. Off the root a gives only the dtype and the trailing shape.
Call scatterv(Communicator& c, const py::array& a,
              const std::optional<std::vector<std::int64_t>>& counts, int root, const Array& out,
              const std::string& dtype) {
  const Buffer in = as_buffer(a, "a", false, dtype);
  if (in.shape.empty()) invalid("scatterv: a needs a first axis (its rows)");
  if (root < 0 || root >= c.size()) invalid("scatterv: root " + std::to_string(root) + " is not a rank");
  const ScattervPlan plan = agree_on_scatterv(c, in, root, counts);
  if (!plan.root_error.empty()) invalid(plan.root_error);
  for (int r = 0; r < c.size(); ++r) {
    if (plan.row_elems[r] != plan.row_elems[root]) {
      invalid("scatterv: rank " + std::to_string(r) + "'s a has rows of " +
              std::to_string(plan.row_elems[r]) + " elements, the root's " +
              std::to_string(plan.row_elems[root]));
    }
  }
  auto send_counts = std::make_shared<std::vector<std::size_t>>();
  for (std::int64_t rows : plan.rows) {
    send_counts->push_back(static_cast<std::size_t>(rows) * row_elems(in));
  }
  std::vector<py::ssize_t> shape(in.shape.begin(), in.shape.end());
  shape[0] = plan.rows[static_cast<std::size_t>(c.rank())];
  py::array r = result_array(out, a, shape, "scatterv");
  const Buffer res = as_buffer(r, "out", true, dtype);
  const void* send = c.rank() == root ? in.data : nullptr;
  return {.kind = Call::Kind::scatterv, .send = send, .recv = res.data, .count = res.count,
          .dtype = res.dtype, .root = root, .counts = send_counts, .result = r, .input = a};
}

// A started call: the C++ Request, and the arrays and counts it uses, kept alive (with the
// communicator) until it has ended.
class PyRequest {
 public:
  PyRequest(Request r, Call call, py::object comm)
      : request_(std::move(r)), call_(std::move(call)), comm_(std::move(comm)) {}
  PyRequest(PyRequest&&) = default;
  // A request dropped before its call ended waits for it (the arrays must outlive the call),
  // without the GIL, as wait() does.
  ~PyRequest() {
    py::gil_scoped_release gil;
    Request done = std::move(request_);
  }
  py::object wait() {
    {
      NoGil released;
      request_.wait();
    }
    return call_.result;
  }
  bool test() { return request_.test(); }

 private:
  Request request_;
  Call call_;
  py::object comm_;
};

py::object run(Communicator& c, const Call& call) {
  {
    NoGil released;
    run_call(c, call);
  }
  return call.result;
}

PyRequest start(Communicator& c, Call call) {
  Request r;
  {
    NoGil released;
    r = start_call(c, call);
  }
  return PyRequest(std::move(r), std::move(call), py::cast(&c));
}

// Binds `prepare` as iNAME (returns a synk.Request whose wait() returns the result).
template <typename... A, typename... Extra>
void bind_started(py::class_<Communicator>& cls, const std::string& name,
                  Call (*prepare)(Communicator&, A...), const Extra&... extra) {
  cls.def(("i" + name).c_str(),
          [prepare](Communicator& c, A... a) { return start(c, prepare(c, a...)); }, extra...);
}

// Binds `prepare` as NAME (blocking: returns the result) and iNAME, with the same arguments.
template <typename... A, typename... Extra>
void bind_call(py::class_<Communicator>& cls, const std::string& name,
               Call (*prepare)(Communicator&, A...), const Extra&... extra) {
  cls.def(name.c_str(), [prepare](Communicator& c, A... a) { return run(c, prepare(c, a...)); },
          extra...);
  bind_started(cls, name, prepare, extra...);
}

}  // namespace

void add_communicator(py::module_& m) {
  py::class_<Communicator> cls(m, "Communicator", "A group of ranks and the collectives they run.",
                               py::dynamic_attr());
  cls
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
             NoGil released;
             return c.split(color, key);
           }, py::arg("color"), py::arg("key") = 0)
      .def("barrier", [](Communicator& c) {
             NoGil released;
             c.barrier();
           });
  const auto a = py::arg("a").noconvert();
  const auto out = py::arg("out") = py::none();
  const auto dtype = py::arg("dtype") = "";
  // The blocking all_reduce is all_reduce_fast.cc's entry point.
  bind_started(cls, "all_reduce", &all_reduce, a, py::arg("op") = "sum", py::kw_only(), out,
               dtype);
  bind_call(cls, "reduce", &reduce, a, py::arg("op") = "sum", py::arg("root") = 0,
            py::kw_only(), out, dtype);
  bind_call(cls, "broadcast", &broadcast, a, py::arg("root") = 0, py::kw_only(), dtype);
  bind_call(cls, "all_gather", &all_gather, a, py::kw_only(), out, dtype);
  bind_call(cls, "gather", &gather, a, py::arg("root") = 0, py::kw_only(), out, dtype);
  bind_call(cls, "scatter", &scatter, a, py::arg("root") = 0, py::kw_only(), out, dtype);
  bind_call(cls, "gatherv", &gatherv, a, py::arg("root") = 0, py::kw_only(), out, dtype);
  bind_call(cls, "scatterv", &scatterv, a, py::arg("counts") = py::none(), py::arg("root") = 0,
            py::kw_only(), out, dtype);
  bind_call(cls, "reduce_scatter", &reduce_scatter, a, py::arg("op") = "sum", py::kw_only(), out,
            dtype);
  add_fast_all_reduce(cls);
  py::class_<PyRequest>(m, "Request",
                        "A started collective (comm.iall_reduce, ...): wait() returns its "
                        "result; the arrays stay synk's until then.")
      .def("wait", &PyRequest::wait, "Waits for the call (without the GIL); returns its result.")
      .def("test", &PyRequest::test, "Whether the call has ended; never blocks.");
}

}  // namespace synk::python
