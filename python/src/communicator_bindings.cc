// synk.Communicator: the world, or an adopted mpi4py communicator, and its collectives on NumPy
// arrays. Every call reads and writes the arrays' own memory (arrays.h) and releases the GIL
// while it runs, so other Python threads go on while a rank waits for the others.
#include "communicator_bindings.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <pybind11/stl.h>

#include "all_reduce_fast.h"
#include "arrays.h"
#include "grouped_bindings.h"
#include "no_gil.h"
#include "made_only.h"
#include "refusals.h"
#include "synk/agreement.h"
#include "synk/communicator.h"
#include "synk/error.h"
#include "synk/request.h"

namespace synk::python {
namespace {

using Array = std::optional<py::array>;

// MPI_Comm of an mpi4py communicator (Open MPI's is a pointer; mpi4py gives it as an int).
// Another type is a TypeError (without importing mpi4py, which need not be there for it).
MPI_Comm handle_of(const py::object& mpi4py_comm) {
  const py::handle type = py::type::of(mpi4py_comm);
  const auto refuse = [&] {
    throw py::type_error("Communicator(comm): comm must be None (every rank) or an mpi4py "
                         "communicator (mpi4py.MPI.Comm), not " +
                         py::str(type.attr("__name__")).cast<std::string>());
  };
  const std::string module = py::str(type.attr("__module__")).cast<std::string>();
  if (module.rfind("mpi4py", 0) != 0) refuse();
  const py::module_ mpi = py::module_::import("mpi4py.MPI");
  if (!py::isinstance(mpi4py_comm, mpi.attr("Comm"))) refuse();
  if (mpi4py_comm.equal(mpi.attr("COMM_NULL"))) invalid("Communicator(comm): comm is COMM_NULL");
  const auto h = mpi.attr("_handleof")(mpi4py_comm).cast<std::uintptr_t>();
  return reinterpret_cast<MPI_Comm>(h);
}

// synk._model.refuse_on_master_alone: a new world, or a split of a communicator that serves
// distribute()'s requests, made by the master alone would wait in MPI forever.
void refuse_on_master_alone(const char* what, const py::object& comm) {
  py::module_::import("synk._model").attr("refuse_on_master_alone")(what, comm);
}

Communicator make_communicator(const py::object& comm, const std::string& backend) {
  CommOptions options;
  options.backend = backend;
  if (comm.is_none()) {
    refuse_on_master_alone("synk.Communicator()", py::none());
    return without_gil([&] { return Communicator(options); });
  }
  const MPI_Comm handle = handle_of(comm);
  return without_gil([&] { return Communicator(handle, options); });
}

// `out` checked against the shape and dtype the result has, or a new C-contiguous array of
// them (the dtype of `like`: a uint16 array for bfloat16).
py::array result_array(const Array& out, const py::array& like,
                       const std::vector<py::ssize_t>& shape, const char* op) {
  if (!out) return py::array(like.dtype(), shape);
  check_byte_order(out->dtype(), "out");  // said first: '>f4' is no float32, but looks like it
  if (!out->dtype().equal(like.dtype())) {  // equal, not the same object: int64 is longlong
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

std::string shape_text(std::span<const py::ssize_t> shape) {
  return py::str(py::tuple(py::cast(std::vector<py::ssize_t>(shape.begin(), shape.end()))))
      .cast<std::string>();
}

// The one rank at fault, as every rank found it from what they agreed on: its own message
// there (`precise`, which throws), a Remote naming it (`why`) elsewhere.
[[noreturn]] void fail_at(Communicator& c, const std::string& op, int rank,
                          const std::function<void()>& precise, const std::string& why) {
  if (c.rank() == rank) precise();
  throw Error(ErrorCode::Remote,
              op + ": rank " + std::to_string(rank) + " rejected its arguments: " + why);
}

// After the all_gather in which gatherv's or scatterv's ranks agree, every rank refuses alike:
// the lowest rank whose own checks failed (`failed(r)`; fail_as_agreed), then roots that
// differ (`root_of(r)`; InvalidUsage).
template <class Failed, class RootOf>
void refuse_as_agreed(Communicator& c, const std::string& op, const std::optional<Error>& mine,
                      Failed failed, RootOf root_of) {
  for (int r = 0; r < c.size(); ++r) {
    if (failed(r)) fail_as_agreed(c, op, r, mine);
  }
  for (int r = 1; r < c.size(); ++r) {
    if (root_of(r) != root_of(0)) {
      throw Error(ErrorCode::InvalidUsage, op + ": mismatched calls: rank 0 gave root " +
                                               std::to_string(root_of(0)) + ", rank " +
                                               std::to_string(r) + " root " +
                                               std::to_string(root_of(r)));
    }
  }
}

// gatherv's or scatterv's a, checked before the ranks agree: the root is a rank, and a is
// memory of a synk type with a first axis (its rows).
Buffer rows_in(Communicator& c, const py::array& a, int root, const std::string& op,
               const std::string& dtype) {
  if (root < 0 || root >= c.size()) {
    invalid(op + ": root " + std::to_string(root) + " is not a rank (" +
            std::to_string(c.size()) + " ranks)");
  }
  const Buffer in = as_buffer(a, "a", false, dtype);
  if (in.shape.empty()) invalid(op + ": a needs a first axis (its rows)");
  return in;
}

// A collective with its arguments checked: which one, its C++ arguments, what it returns, and
// the array it reads, which a started call keeps alive until it ends. Plain data, so that a
// blocking call costs no allocation beyond its result.
struct Call {
  enum class Kind { all_reduce, reduce, broadcast, all_gather, gather, scatter, reduce_scatter,
                    gatherv, scatterv, all_to_all, all_to_allv };
  Kind kind = Kind::all_reduce;
  const void* send = nullptr;
  void* recv = nullptr;
  // The send count; the receive count of scatter(v) and reduce_scatter; all_to_all's per pair.
  std::size_t count = 0;
  DataType dtype = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  std::shared_ptr<const std::vector<std::size_t>> counts{};  // gatherv's and scatterv's
  std::shared_ptr<const std::vector<std::size_t>> recv_counts{};  // all_to_allv's
  py::object result{};
  py::object input{};
  // This rank's out did not fit: raised once the call has ended (see result_into).
  std::shared_ptr<const Error> after{};
};

void raise_after(const Call& call) {
  if (call.after) throw *call.after;
}

// The result: out where it fits `shape`, else a new array, and out's error kept for once the
// call has ended: the rank still takes part, so that the others neither wait for it nor pair
// its next call with this one (agreeing first would cost every call a collective). Sets
// call.recv and call.result.
void result_into(Call& call, const Array& out, const py::array& like,
                 const std::vector<py::ssize_t>& shape, const char* op, const std::string& dtype) {
  if (out) {
    try {
      const py::array r = result_array(out, like, shape, op);
      call.recv = as_buffer(r, "out", true, dtype).data;
      call.result = r;
      return;
    } catch (const Error& e) {
      call.after = std::make_shared<const Error>(e);
    }
  }
  const py::array r = result_array(std::nullopt, like, shape, op);
  call.recv = as_buffer(r, "out", true, dtype).data;
  call.result = r;
}

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
    case K::all_to_all: return c.all_to_all(k.send, k.recv, k.count, k.dtype);
    case K::all_to_allv:
      return c.all_to_allv(k.send, *k.counts, k.recv, *k.recv_counts, k.dtype);
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
    case K::all_to_all: return c.iall_to_all(k.send, k.recv, k.count, k.dtype);
    case K::all_to_allv:
      return c.iall_to_allv(k.send, *k.counts, k.recv, *k.recv_counts, k.dtype);
  }
  return {};
}

// A reduction's result into the given out where it fits, else a new array (reduction_out);
// sets call.recv, call.result and call.after.
void reduction_into(Call& call, const py::array& out, const py::array& a, const Buffer& in,
                    const char* op, const std::string& dtype) {
  py::array scratch;
  std::optional<Error> error;
  call.recv = reduction_out(out, a, in, op, dtype, scratch, error).data;
  call.result = error ? scratch : out;
  if (error) call.after = std::make_shared<const Error>(*error);
}

// The result into `a` on a rank that writes it there (all_reduce's, reduce's root, broadcast's
// others), or into a new array where `a` is read-only, raised once the call has ended
// (read_only_scratch): on the mpi backend a non-root whose reduce refused its `a` before the
// call left it, and the next reduce summed its stale input in, silently. Sets call.recv and
// call.result.
void written_into(Call& call, const py::array& a, const Buffer& in, const char* op,
                  const std::string& dtype) {
  call.result = a;
  call.recv = const_cast<void*>(in.data);
  if (a.writeable()) return;
  py::array scratch;
  std::optional<Error> error;
  call.recv = read_only_scratch(a, op, dtype, scratch, error).data;
  call.result = scratch;
  call.after = std::make_shared<const Error>(*error);
}

Call all_reduce(Communicator& /*c*/, const py::array& a, const std::string& op, const Array& out,
                const std::string& dtype) {
  const Buffer in = as_buffer(a, "a", false, dtype);
  const ReduceOp rop = op_for(reduce_op(op), in, "all_reduce");
  Call call{.kind = Call::Kind::all_reduce, .send = in.data, .count = in.count,
            .dtype = in.dtype, .op = rop, .input = a};
  if (out) {
    reduction_into(call, *out, a, in, "all_reduce", dtype);
  } else {
    written_into(call, a, in, "all_reduce", dtype);
  }
  return call;
}

Call reduce(Communicator& c, const py::array& a, const std::string& op, int root,
            const Array& out, const std::string& dtype) {
  const Buffer in = as_buffer(a, "a", false, dtype);
  const ReduceOp rop = op_for(reduce_op(op), in, "reduce");
  Call call{.kind = Call::Kind::reduce, .send = in.data, .count = in.count, .dtype = in.dtype,
            .op = rop, .root = root, .result = py::none(), .input = a};
  if (c.rank() != root) return call;
  if (out) {
    reduction_into(call, *out, a, in, "reduce", dtype);
  } else {
    written_into(call, a, in, "reduce", dtype);
  }
  return call;
}

Call broadcast(Communicator& c, const py::array& a, int root, const std::string& dtype) {
  const Buffer b = as_buffer(a, "a", false, dtype);
  Call call{.kind = Call::Kind::broadcast, .recv = const_cast<void*>(b.data), .count = b.count,
            .dtype = b.dtype, .root = root, .result = a, .input = a};
  if (c.rank() != root) written_into(call, a, b, "broadcast", dtype);
  return call;
}

Call all_gather(Communicator& c, const py::array& a, const Array& out, const std::string& dtype) {
  const Buffer in = as_buffer(a, "a", false, dtype);
  Call call{.kind = Call::Kind::all_gather, .send = in.data, .count = in.count, .dtype = in.dtype,
            .input = a};
  result_into(call, out, a, with_leading(c.size(), in.shape), "all_gather", dtype);
  return call;
}

// Only the root has a result; a root whose out does not fit gathers into a new array and raises
// once the call has ended (result_into).
Call gather(Communicator& c, const py::array& a, int root, const Array& out,
            const std::string& dtype) {
  const Buffer in = as_buffer(a, "a", false, dtype);
  Call call{.kind = Call::Kind::gather, .send = in.data, .count = in.count, .dtype = in.dtype,
            .root = root, .result = py::none(), .input = a};
  if (c.rank() == root) result_into(call, out, a, with_leading(c.size(), in.shape), "gather", dtype);
  return call;
}

// The root's a holds size() blocks along its first axis; every rank gets its block. Off the
// root a gives only the shape and dtype (or out does, with a None).
Call scatter(Communicator& c, const std::optional<py::array>& a, int root, const Array& out,
             const std::string& dtype) {
  const bool here = c.rank() == root;
  if (!a && (here || !out)) {
    invalid(here ? "scatter: the root must give a" : "scatter: give a (for its shape) or out");
  }
  if (a) {
    const Buffer in = as_buffer(*a, "a", false, dtype);
    if (in.shape.empty() || in.shape[0] != c.size()) {
      invalid("scatter: a's first axis must have one block per rank (" +
              std::to_string(c.size()) + ")");
    }
    const std::vector<py::ssize_t> block(in.shape.begin() + 1, in.shape.end());
    Call call{.kind = Call::Kind::scatter, .send = here ? in.data : nullptr,
              .dtype = in.dtype, .root = root, .input = *a};
    result_into(call, out, *a, block, "scatter", dtype);
    call.count = in.count / static_cast<std::size_t>(c.size());
    return call;
  }
  const Buffer res = as_buffer(*out, "out", true, dtype);  // out alone gives the shape
  return {.kind = Call::Kind::scatter, .send = nullptr, .recv = res.data, .count = res.count,
          .dtype = res.dtype, .root = root, .result = *out, .input = py::none()};
}

Call reduce_scatter(Communicator& c, const py::array& a, const std::string& op, const Array& out,
                    const std::string& dtype) {
  const Buffer in = as_buffer(a, "a", false, dtype);
  const ReduceOp rop = op_for(reduce_op(op), in, "reduce_scatter");
  if (in.shape.empty() || in.shape[0] % c.size() != 0) {
    invalid("reduce_scatter: a's first axis must divide into one block per rank (" +
            std::to_string(c.size()) + ")");
  }
  std::vector<py::ssize_t> block(in.shape.begin(), in.shape.end());
  block[0] /= c.size();
  Call call{.kind = Call::Kind::reduce_scatter, .send = in.data,
            .count = in.count / static_cast<std::size_t>(c.size()), .dtype = in.dtype,
            .op = rop, .input = a};
  result_into(call, out, a, block, "reduce_scatter", dtype);
  return call;
}

// The elements in one row of a (all of a 0-d or 1-d array's first axis counts as rows of 1).
std::size_t row_elems(const Buffer& b) {
  std::size_t n = 1;
  for (std::size_t i = 1; i < b.shape.size(); ++i) n *= static_cast<std::size_t>(b.shape[i]);
  return n;
}

// What a rank gives gatherv's all_gather: whether its own checks failed, its root, its rows and
// row size, at the root the rows of its out (-1: no out; -2: not the result's row shape), and
// its dtype.
enum GathervField { gv_failed, gv_root, gv_rows, gv_row, gv_out_rows, gv_dtype, gv_fields };

// Every rank's dtype (dtype_of(r), from the ranks' agreement) must be this rank's: else the
// values of one would be read as the other's, silently where the call is not compared.
template <class At>
void same_dtype_everywhere(Communicator& c, const char* op, DataType mine, const At& dtype_of) {
  for (int r = 0; r < c.size(); ++r) {
    const auto theirs = static_cast<DataType>(dtype_of(r));
    if (theirs != mine) {
      invalid(std::string(op) + ": rank " + std::to_string(r) + "'s a is " + to_string(theirs) +
              ", this rank's " + to_string(mine) + "; every rank passes the same dtype");
    }
  }
}

// out at the root, checked before the ranks agree as far as it can be without their rows: its
// dtype, memory and row shape. Its rows, or -2 where its row shape is not a's.
std::int64_t out_rows_before(const Array& out, const py::array& a, const Buffer& in, const char* op,
                             const std::string& dtype) {
  if (!out) return -1;
  result_array(out, a, shape_of(*out), op);
  const Buffer b = as_buffer(*out, "out", true, dtype);
  if (b.shape.empty() || !std::ranges::equal(b.shape.subspan(1), in.shape.subspan(1))) return -2;
  return b.shape[0];
}

// Each rank's a holds rows of the same trailing shape, as many as it likes; the root gets them
// all, in rank order, along the first axis. The ranks first all_gather their rows and the
// outcome of their checks (a's, and the root's out's), so that every rank refuses alike.
Call gatherv(Communicator& c, const py::array& a, int root, const Array& out,
             const std::string& dtype) {
  Buffer in;
  std::int64_t mine[gv_fields] = {0, root, 0, 0, -1, 0};
  const std::optional<Error> failed = failure_of([&] {
    in = rows_in(c, a, root, "gatherv", dtype);
    mine[gv_dtype] = static_cast<std::int64_t>(in.dtype);
    mine[gv_rows] = in.shape[0];
    mine[gv_row] = static_cast<std::int64_t>(row_elems(in));
    if (c.rank() == root) mine[gv_out_rows] = out_rows_before(out, a, in, "gatherv", dtype);
  });
  mine[gv_failed] = failed ? 1 : 0;
  const auto n = static_cast<std::size_t>(c.size());
  std::vector<std::int64_t> all(gv_fields * n);
  without_gil([&] { c.all_gather(mine, all.data(), gv_fields, DataType::int64); });
  const auto at = [&](int r, GathervField f) {
    return all[gv_fields * static_cast<std::size_t>(r) + f];
  };
  refuse_as_agreed(c, "gatherv", failed, [&](int r) { return at(r, gv_failed) != 0; },
                   [&](int r) { return at(r, gv_root); });
  same_dtype_everywhere(c, "gatherv", in.dtype, [&](int r) { return at(r, gv_dtype); });
  const std::int64_t row = at(c.rank(), gv_row);
  auto counts = std::make_shared<std::vector<std::size_t>>();
  py::ssize_t total_rows = 0;
  for (int r = 0; r < c.size(); ++r) {
    if (at(r, gv_row) != row) {
      invalid("gatherv: rank " + std::to_string(r) + "'s rows have " +
              std::to_string(at(r, gv_row)) + " elements, this rank's " + std::to_string(row));
    }
    counts->push_back(static_cast<std::size_t>(at(r, gv_rows) * row));
    total_rows += at(r, gv_rows);
  }
  std::vector<py::ssize_t> shape(in.shape.begin(), in.shape.end());
  shape[0] = total_rows;
  const std::int64_t root_out = at(root, gv_out_rows);
  if (root_out != -1 && root_out != total_rows) {
    fail_at(c, "gatherv", root, [&] { result_array(out, a, shape, "gatherv"); },
            "the root's out does not have the result's shape " + shape_text(shape));
  }
  py::object r = py::none();
  void* recv = nullptr;
  if (c.rank() == root) {
    py::array arr = result_array(out, a, shape, "gatherv");
    recv = as_buffer(arr, "out", true, dtype).data;
    r = arr;
  }
  return {.kind = Call::Kind::gatherv, .send = in.data, .recv = recv, .count = in.count,
          .dtype = in.dtype, .root = root, .counts = counts, .result = r, .input = a};
}

// What the ranks agree on before a scatterv, by one all_gather: whether each rank's own checks
// failed, its root, its row size and its out's rows (-1: no out; -2: not a's row shape), and the
// root's counts and whether its a holds them; so that every rank refuses what is wrong alike.
enum ScattervField { sv_failed, sv_root, sv_row, sv_out_rows, sv_root_ok, sv_dtype, sv_counts };

struct ScattervPlan {
  std::vector<std::int64_t> rows;  // the root's counts
  std::vector<std::int64_t> row_elems;
  std::vector<std::int64_t> out_rows;
  std::string root_error;
};

ScattervPlan agree_on_scatterv(Communicator& c, const py::array& a, Buffer& in, int root,
                               const std::optional<std::vector<std::int64_t>>& counts,
                               const Array& out, const std::string& dtype) {
  const auto n = static_cast<std::size_t>(c.size());
  const std::size_t fields = sv_counts + n;
  std::vector<std::int64_t> mine(fields, 0);
  mine[sv_root] = root;
  const std::optional<Error> failed = failure_of([&] {
    in = rows_in(c, a, root, "scatterv", dtype);
    mine[sv_dtype] = static_cast<std::int64_t>(in.dtype);
    mine[sv_row] = static_cast<std::int64_t>(row_elems(in));
    mine[sv_out_rows] = out_rows_before(out, a, in, "scatterv", dtype);
  });
  mine[sv_failed] = failed ? 1 : 0;
  if (!failed && c.rank() == root) {
    std::int64_t sum = 0;
    const bool fits = counts && counts->size() == n;
    for (std::size_t r = 0; fits && r < n; ++r) {
      mine[sv_counts + r] = (*counts)[r];
      // Each within a's rows, so that the sum cannot overflow.
      const bool in_range = (*counts)[r] >= 0 && (*counts)[r] <= in.shape[0];
      sum = in_range && sum >= 0 ? sum + (*counts)[r] : -1;
    }
    mine[sv_root_ok] = fits && sum == in.shape[0] ? 1 : 0;
  }
  std::vector<std::int64_t> all(n * fields);
  without_gil([&] { c.all_gather(mine.data(), all.data(), fields, DataType::int64); });
  const auto at = [&](int r, std::size_t f) {
    return all[static_cast<std::size_t>(r) * fields + f];
  };
  refuse_as_agreed(c, "scatterv", failed, [&](int r) { return at(r, sv_failed) != 0; },
                   [&](int r) { return at(r, sv_root); });
  same_dtype_everywhere(c, "scatterv", in.dtype, [&](int r) { return at(r, sv_dtype); });
  ScattervPlan plan;
  for (std::size_t r = 0; r < n; ++r) {
    plan.rows.push_back(at(root, sv_counts + r));
    plan.row_elems.push_back(at(static_cast<int>(r), sv_row));
    plan.out_rows.push_back(at(static_cast<int>(r), sv_out_rows));
  }
  if (at(root, sv_root_ok) == 0) {
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
  Buffer in;
  const ScattervPlan plan = agree_on_scatterv(c, a, in, root, counts, out, dtype);
  if (!plan.root_error.empty()) invalid(plan.root_error);
  for (int r = 0; r < c.size(); ++r) {
    if (plan.row_elems[r] != plan.row_elems[root]) {
      invalid("scatterv: rank " + std::to_string(r) + "'s a has rows of " +
              std::to_string(plan.row_elems[r]) + " elements, the root's " +
              std::to_string(plan.row_elems[root]));
    }
  }
  std::vector<py::ssize_t> shape(in.shape.begin(), in.shape.end());
  shape[0] = plan.rows[static_cast<std::size_t>(c.rank())];
  for (int r = 0; r < c.size(); ++r) {
    const std::int64_t has = plan.out_rows[r];
    if (has != -1 && has != plan.rows[r]) {
      fail_at(c, "scatterv", r, [&] { result_array(out, a, shape, "scatterv"); },
              "its out does not have the shape of the " + std::to_string(plan.rows[r]) +
                  " rows the root's counts give it");
    }
  }
  auto send_counts = std::make_shared<std::vector<std::size_t>>();
  for (std::int64_t rows : plan.rows) {
    send_counts->push_back(static_cast<std::size_t>(rows) * row_elems(in));
  }
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
  // without the GIL, as wait() does, and says if it failed. One that ended well (wait() or
  // test() saw it, or a started call's moved-from temporary) holds none and keeps the GIL: a
  // destructor that retakes it may end a daemon thread at exit (no_gil.h).
  ~PyRequest() {
    if (!request_.active()) return;
    const NoGil released;
    Request done = std::move(request_);
  }
  py::object wait() {
    Request mine = request_;  // another thread may wait on it too, and end it first
    without_gil([&] { mine.wait(); });
    request_ = Request();  // ended well: the destructor has nothing to wait for
    raise_after(call_);
    return call_.result;
  }
  bool test() {
    const bool done = request_.test();
    if (!done) return false;
    request_ = Request();  // ended well (a failure threw above)
    raise_after(call_);
    return true;
  }

 private:
  Request request_;
  Call call_;
  py::object comm_;
};

py::object run(Communicator& c, const Call& call) {
  without_gil([&] { run_call(c, call); });
  raise_after(call);
  return call.result;
}

PyRequest start(Communicator& c, Call call) {
  Request r = without_gil([&] { return start_call(c, call); });
  return PyRequest(std::move(r), std::move(call), py::cast(&c));
}

// What the ranks agree on before an all_to_all with splits, by one all_gather: whether each
// rank's own checks failed, its dtype and row size, and its splits; so that every rank refuses
// alike, and each learns how many rows every rank sends it.
enum SplitsField { sp_failed, sp_dtype, sp_row, sp_splits };

// a's rows, splits[q] of them to rank q one after another; the result holds the rows every rank
// sent this one, in rank order.
Call all_to_all_split(Communicator& c, const py::array& a, const std::vector<std::int64_t>& splits,
                      const Array& out, const std::string& dtype) {
  const auto n = static_cast<std::size_t>(c.size());
  std::vector<std::int64_t> mine(sp_splits + n, 0);
  Buffer in;
  const std::optional<Error> failed = failure_of([&] {
    in = as_buffer(a, "a", false, dtype);
    if (in.shape.empty()) invalid("all_to_all: a needs a first axis (its rows)");
    mine[sp_dtype] = static_cast<std::int64_t>(in.dtype);
    mine[sp_row] = static_cast<std::int64_t>(row_elems(in));
    if (splits.size() != n) {
      invalid("all_to_all: splits has " + std::to_string(splits.size()) +
              " entries, expected one per rank (" + std::to_string(n) + ")");
    }
    std::int64_t sum = 0;
    for (std::int64_t s : splits) {
      if (s < 0 || s > in.shape[0]) invalid("all_to_all: splits must be rows of a, 0 or more");
      sum += s;
    }
    if (sum != in.shape[0]) {
      invalid("all_to_all: splits add up to " + std::to_string(sum) + " rows, a has " +
              std::to_string(in.shape[0]));
    }
    std::copy(splits.begin(), splits.end(), mine.begin() + sp_splits);
  });
  mine[sp_failed] = failed ? 1 : 0;
  std::vector<std::int64_t> all(n * mine.size());
  without_gil([&] { c.all_gather(mine.data(), all.data(), mine.size(), DataType::int64); });
  const auto at = [&](int r, std::size_t f) {
    return all[mine.size() * static_cast<std::size_t>(r) + f];
  };
  refuse_as_agreed(c, "all_to_all", failed, [&](int r) { return at(r, sp_failed) != 0; },
                   [](int) { return 0; });
  same_dtype_everywhere(c, "all_to_all", in.dtype, [&](int r) { return at(r, sp_dtype); });
  const std::int64_t row = mine[sp_row];
  auto send_counts = std::make_shared<std::vector<std::size_t>>();
  auto recv_counts = std::make_shared<std::vector<std::size_t>>();
  py::ssize_t rows_here = 0;
  for (int r = 0; r < c.size(); ++r) {
    if (at(r, sp_row) != row) {
      invalid("all_to_all: rank " + std::to_string(r) + "'s rows have " +
              std::to_string(at(r, sp_row)) + " elements, this rank's " + std::to_string(row));
    }
    const std::int64_t from_r = at(r, sp_splits + static_cast<std::size_t>(c.rank()));
    send_counts->push_back(static_cast<std::size_t>(splits[static_cast<std::size_t>(r)] * row));
    recv_counts->push_back(static_cast<std::size_t>(from_r * row));
    rows_here += from_r;
  }
  std::vector<py::ssize_t> shape(in.shape.begin(), in.shape.end());
  shape[0] = rows_here;
  Call call{.kind = Call::Kind::all_to_allv, .send = in.data, .count = in.count,
            .dtype = in.dtype, .counts = send_counts, .recv_counts = recv_counts, .input = a};
  result_into(call, out, a, shape, "all_to_all", dtype);
  return call;
}

// a's first axis in size() blocks: block r goes to rank r, and the result (a's shape) holds the
// block each rank sent to this one, in rank order. out may not be a (no in place). With splits,
// all_to_all_split.
Call all_to_all(Communicator& c, const py::array& a,
                const std::optional<std::vector<std::int64_t>>& splits, const Array& out,
                const std::string& dtype) {
  if (splits) return all_to_all_split(c, a, *splits, out, dtype);
  const Buffer in = as_buffer(a, "a", false, dtype);
  if (in.shape.empty() || in.shape[0] % c.size() != 0) {
    invalid("all_to_all: a's first axis must divide into one block per rank (" +
            std::to_string(c.size()) + ")");
  }
  Call call{.kind = Call::Kind::all_to_all, .send = in.data,
            .count = in.count / static_cast<std::size_t>(c.size()), .dtype = in.dtype,
            .input = a};
  result_into(call, out, a, std::vector<py::ssize_t>(in.shape.begin(), in.shape.end()),
              "all_to_all", dtype);
  return call;
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
}  // namespace synk::python

SYNK_PYTHON_MADE_ONLY(synk::python::PyRequest)

namespace synk::python {

void add_communicator(py::module_& m) {
  // Registered before the methods that return it, so that their signatures name synk.Request
  // rather than the C++ type.
  py::class_<PyRequest>(m, "Request",
                        "A started collective (comm.iall_reduce, ...): wait() returns its "
                        "result; the arrays stay synk's until then.")
      .def("wait", &PyRequest::wait, "Waits for the call (without the GIL); returns its result.")
      .def("test", &PyRequest::test, "Whether the call has ended; never blocks.");
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
      .def("split", [](const py::object& self, int color, int key) {
             refuse_on_master_alone("split", self);
             const Communicator& c = self.cast<const Communicator&>();
             return without_gil([&] { return c.split(color, key); });
           }, py::arg("color"), py::arg("key") = 0)
      .def("barrier", [](Communicator& c) { without_gil([&] { c.barrier(); }); });
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
  bind_call(cls, "all_to_all", &all_to_all, a, py::arg("splits") = py::none(), py::kw_only(),
            out, dtype);
  add_fast_all_reduce(cls);
  add_grouped_calls(cls);
}

}  // namespace synk::python
