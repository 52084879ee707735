// comm.grouped_all_reduce and comm.grouped_broadcast: a list of NumPy arrays, each in place, in
// as few collectives as libsynk's lists take (synk/shared_list.h: packed per dtype, up to
// SYNK_FUSION_BYTES a call), as Horovod's grouped_allreduce and Synkhronos's all_reduce of a
// list of shared variables: a model's many small gradients cost a call or two, not one each.
#include "grouped_bindings.h"

#include <optional>
#include <string>
#include <vector>

#include "arrays.h"
#include "no_gil.h"
#include "refusals.h"
#include "synk/shared_list.h"

namespace synk::python {
namespace {

std::string type_name(const py::handle& object) {
  return py::str(py::type::of(object).attr("__name__")).cast<std::string>();
}

// What a grouped call reads: the entries as libsynk sees them, and the arrays, held until the
// call has ended.
struct Entries {
  std::vector<SharedRef> refs;
  std::vector<py::array> arrays;
};

// `arrays` (a list or tuple of NumPy arrays) as libsynk entries, each checked as every call's
// array is (C-contiguous, native byte order, a synk dtype, writable where synk writes it). A
// bool array is refused: one op runs on every entry, and bools reduce by their own rule
// (comm.all_reduce's logical or and and).
Entries entries_of(const py::object& arrays, const std::string& op, bool writable) {
  const std::string single = "comm." + op.substr(std::string("grouped_").size());
  if (!py::isinstance<py::list>(arrays) && !py::isinstance<py::tuple>(arrays)) {
    invalid(op + ": arrays must be a list or tuple of NumPy arrays, not " + type_name(arrays) +
            " (one array: " + single + ")");
  }
  Entries e;
  for (const py::handle item : arrays) {
    const std::string what = "entry " + std::to_string(e.arrays.size());
    if (!py::isinstance<py::array>(item)) {
      invalid(op + ": " + what + " is a " + type_name(item) + ", not a NumPy array");
    }
    e.arrays.push_back(py::reinterpret_borrow<py::array>(item));
    Buffer b;
    try {
      b = as_buffer(e.arrays.back(), what.c_str(), writable);
    } catch (const Error& err) {
      invalid(op + ": " + err.message());
    }
    if (b.logical) invalid(op + ": " + what + " is a bool array: pass it to " + single + " alone");
    e.refs.emplace_back(b.data, b.count, b.dtype);
  }
  return e;
}

// libsynk's errors name the list call "all_reduce(list)" (or "broadcast(list)"); in Python it
// is `op`.
template <class Call>
void run_as(const std::string& op, const std::string& libsynk_name, Call&& call) {
  try {
    without_gil(call);
  } catch (const Error& err) {
    const std::string text = err.message();
    if (text.rfind(libsynk_name, 0) != 0) throw;
    throw Error(err.code(), op + text.substr(libsynk_name.size()));
  }
}

// A rank's own checks, run before the ranks agree; a Python error inside them (an object whose
// type misbehaves) is refused as theirs are, so that no rank is left waiting in the agreement.
template <class Checks>
std::optional<Error> failure_of_checks(const std::string& op, Checks&& checks) {
  return failure_of([&] {
    try {
      checks();
    } catch (const py::error_already_set& e) {
      invalid(op + ": " + e.what());
    }
  });
}

py::list as_list(const Entries& e) {
  py::list out;
  for (const py::array& a : e.arrays) out.append(a);
  return out;
}

py::list grouped_all_reduce(Communicator& c, const py::object& arrays, const std::string& op) {
  ReduceOp how = ReduceOp::sum;
  Entries e;
  const std::optional<Error> failed = failure_of_checks("grouped_all_reduce", [&] {
    how = reduce_op(op);
    e = entries_of(arrays, "grouped_all_reduce", true);
  });
  refuse_where_any_failed(c, "grouped_all_reduce", failed);
  run_as("grouped_all_reduce", "all_reduce(list)",
         [&] { all_reduce(c, std::span<const SharedRef>(e.refs), how); });
  return as_list(e);
}

py::list grouped_broadcast(Communicator& c, const py::object& arrays, int root) {
  Entries e;
  const std::optional<Error> failed = failure_of_checks("grouped_broadcast", [&] {
    if (root < 0 || root >= c.size()) {
      invalid("grouped_broadcast: root " + std::to_string(root) + " is not a rank (" +
              std::to_string(c.size()) + " ranks)");
    }
    e = entries_of(arrays, "grouped_broadcast", c.rank() != root);
  });
  refuse_where_any_failed(c, "grouped_broadcast", failed);
  run_as("grouped_broadcast", "broadcast(list)",
         [&] { broadcast(c, std::span<const SharedRef>(e.refs), root); });
  return as_list(e);
}

}  // namespace

void add_grouped_calls(py::class_<Communicator>& cls) {
  cls.def("grouped_all_reduce", &grouped_all_reduce, py::arg("arrays"), py::arg("op") = "sum",
          "grouped_all_reduce(arrays, op='sum'): each array of the list (or tuple) becomes its "
          "reduction over the ranks, in place, in as few collectives as the list packs into "
          "(per dtype, SYNK_FUSION_BYTES a call). Every rank passes arrays of the same sizes and "
          "dtypes in the same order. Returns the list of the arrays.");
  cls.def("grouped_broadcast", &grouped_broadcast, py::arg("arrays"), py::arg("root") = 0,
          "grouped_broadcast(arrays, root=0): each array of the list takes the root's values, in "
          "place, packed as grouped_all_reduce's. Returns the list of the arrays.");
}

}  // namespace synk::python
