// The C++ parts under synk.Data and synk.distribute (python/synk/data.py, distribute.py): the
// node-shared segment of a Data, seen from NumPy without a copy, and the channel that carries
// the master's requests to the workers. The Synkhronos model itself is written in Python on top.
#include "model_bindings.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "arrays.h"
#include "no_gil.h"
#include "made_only.h"
#include "synk/communicator.h"
#include "synk/data.h"
#include "synk/distribute.h"
#include "synk/error.h"

namespace synk::python {
namespace {

using detail::DataStore;

std::unique_ptr<DataStore> make_store(const Communicator& comm, std::vector<std::size_t> shape,
                                      std::size_t itemsize, double oversize) {
  NoGil released;
  return std::make_unique<DataStore>(comm, std::move(shape), itemsize, oversize);
}

// The store's rows as an array of `dtype` over the segment itself. The array holds the
// mapping, so it stays readable after a resize that moves the rows, or a free().
py::array rows_view(const DataStore& s, const py::dtype& dtype, bool writable) {
  auto keep = std::make_unique<std::shared_ptr<const void>>(s.mapping());
  py::capsule base(keep.get(), [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
  keep.release();
  const std::vector<std::size_t>& shape = s.shape();
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  static unsigned char empty = 0;  // a segment freed has no memory; NumPy needs an address
  const void* data = s.bytes() ? s.bytes() : &empty;
  py::array a(dtype, dims, {}, data, base);
  if (!writable) py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

// Rank 0's bytes fill every node's copy; the other ranks pass None.
void set_value(DataStore& s, const std::optional<py::array>& values) {
  const void* data = nullptr;
  std::size_t bytes = 0;
  if (values) {
    if (!(values->flags() & py::array::c_style)) invalid("Data.set_value: the array is not C-contiguous");
    data = values->data();
    bytes = static_cast<std::size_t>(values->nbytes());
  }
  NoGil released;
  s.set_value(data, bytes);
}

// loader(array) fills the node's copy, on each node's local rank 0; the GIL is taken back
// only for the loader itself. A loader that raises raises its own exception on its rank (the
// others get synk.Remote, as from a Function's body).
void load(DataStore& s, const py::function& loader, const py::dtype& dtype) {
  std::optional<py::error_already_set> raised;
  try {
    NoGil released;
    s.load([&](void*) {
      py::gil_scoped_acquire hold;
      try {
        loader(rows_view(s, dtype, true));
      } catch (py::error_already_set& e) {
        const std::string text = e.what();
        raised.emplace(std::move(e));
        throw std::runtime_error(text);  // for the agreement: the other ranks' Remote names it
      }
    });
  } catch (const Error&) {
    if (raised) throw *raised;
    throw;
  }
}

// One master's request as bytes (the Python side pickles it), sent to every worker; None
// closes. The watch lets a worker's wait end in synk.Remote when a rank of its node dies.
class RequestChannel {
 public:
  explicit RequestChannel(Communicator& comm) : comm_(&comm) {
    NoGil released;
    watch_.start(comm);
  }
  void send(const std::optional<py::bytes>& payload) {
    detail::DriveRequest m;
    m.kind = payload ? detail::DriveRequest::Kind::call : detail::DriveRequest::Kind::close;
    if (payload) {
      const std::string text = *payload;
      m.inputs.emplace_back(text.begin(), text.end());
    }
    NoGil released;
    detail::send_request(*comm_, m, watch_);
  }
  py::object receive() {
    detail::DriveRequest m;
    {
      NoGil released;
      m = detail::receive_request(*comm_, watch_);
    }
    if (m.kind == detail::DriveRequest::Kind::close) return py::none();
    const std::vector<unsigned char>& b = m.inputs.at(0);
    return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
  }
  std::string deaths() const { return watch_.deaths(); }
  // On the master between distribute() and close(), outside a request: its own collectives on
  // the communicator are refused (see detail::set_master_alone).
  void master_alone(bool alone) {
    detail::set_master_alone(*comm_, alone ? "distribute()" : nullptr);
  }

 private:
  Communicator* comm_;
  detail::PeerWatch watch_;
};

}  // namespace

void add_model(py::module_& m) {
  py::class_<DataStore>(m, "_DataStore", "A Data's node-shared segment (see synk.Data).")
      .def(py::init(&make_store), py::arg("comm"), py::arg("shape"), py::arg("itemsize"),
           py::arg("oversize") = 1.0, py::keep_alive<1, 2>())
      .def("set_value", &set_value, py::arg("values").none(true))
      .def("load", &load, py::arg("loader"), py::arg("dtype"))
      .def("resize", [](DataStore& s, std::size_t rows, double oversize) {
             NoGil released;
             s.resize(rows, oversize);
           }, py::arg("rows"), py::arg("oversize") = 1.0)
      .def("free", [](DataStore& s) { s.free(); })
      .def("view", &rows_view, py::arg("dtype"), py::arg("writable") = false)
      .def_property_readonly("shape", [](const DataStore& s) { return s.shape(); })
      .def_property_readonly("capacity_rows", &DataStore::capacity_rows)
      .def_property_readonly("segment_name", &DataStore::segment_name);
  py::class_<RequestChannel>(m, "_RequestChannel", "The master-driven mode's requests.")
      .def(py::init<Communicator&>(), py::arg("comm"), py::keep_alive<1, 2>())
      .def("send", &RequestChannel::send, py::arg("payload").none(true))
      .def("receive", &RequestChannel::receive)
      .def("deaths", &RequestChannel::deaths)
      .def("master_alone", &RequestChannel::master_alone, py::arg("alone"));
}

}  // namespace synk::python
