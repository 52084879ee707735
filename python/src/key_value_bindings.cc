// synk.KeyValue and synk.Updater: mshadow-ps's push and pull by key on NumPy arrays. A pushed
// array and a pull's out array stay referenced until pull_wait; callbacks and Updater calls,
// which run on the KeyValue's own thread, take the GIL for the Python part only, and every
// KeyValue call releases it, so that thread never waits on a caller that holds it.
#include "key_value_bindings.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <pybind11/numpy.h>

#include "arrays.h"
#include "no_gil.h"
#include "made_only.h"
#include "synk/communicator.h"
#include "synk/error.h"
#include "synk/key_value.h"

namespace synk::python {
namespace {


// A key's updates add (or apply the key's op to) its values, which a bool array's bytes cannot
// hold: the collectives take bool arrays, a KeyValue does not.
void refuse_bool(const Buffer& b, const char* what) {
  if (!b.logical) return;
  invalid(std::string("KeyValue: ") + what + " is a bool array, which a key cannot hold (its "
          "updates add); pass " + what + ".astype(numpy.uint8)");
}

// The NumPy dtype of a synk type (bfloat16: its bits, as uint16).
py::dtype numpy_dtype(DataType t) {
  switch (t) {
    case DataType::int8: return py::dtype("int8");
    case DataType::uint8: return py::dtype("uint8");
    case DataType::int16: return py::dtype("int16");
    case DataType::uint16: return py::dtype("uint16");
    case DataType::int32: return py::dtype("int32");
    case DataType::uint32: return py::dtype("uint32");
    case DataType::int64: return py::dtype("int64");
    case DataType::uint64: return py::dtype("uint64");
    case DataType::float16: return py::dtype("float16");
    case DataType::bfloat16: return py::dtype("uint16");
    case DataType::float32: return py::dtype("float32");
    case DataType::float64: return py::dtype("float64");
  }
  return py::dtype("uint8");
}

// A key's array as an array of the Updater's call, NumPy's own: a copy, so that nothing the
// Python code keeps (a momentum buffer, an attribute, the traceback of what it raised) reaches
// synk's memory after the call, which synk reuses or frees.
py::array copy_of(const KeyArray& k) {
  py::array a(numpy_dtype(k.dtype), std::vector<py::ssize_t>{static_cast<py::ssize_t>(k.count)});
  if (k.count > 0) std::memcpy(a.mutable_data(), k.data, k.count * size_of(k.dtype));
  return a;
}

// The call's weights back into synk's: also where the call raised (the weights are then as
// the Updater left them, key_value.h).
void copy_back(const py::array& from, const KeyArray& k) {
  if (k.count > 0) std::memcpy(k.data, from.data(), k.count * size_of(k.dtype));
}

// What a Python exception raised in synk's thread becomes: a synk error naming `where`, made
// while the GIL is held (the Python exception's objects are freed here).
[[noreturn]] void rethrow_python(py::error_already_set& e, const std::string& where) {
  throw Error(ErrorCode::InvalidUsage, where + " raised " + e.what());
}

// synk.Updater: subclass it and define update(key, grad, weights) (and init(key, weights)).
class PyUpdater : public Updater {
 public:
  void init(int key, KeyArray weights) override {
    py::gil_scoped_acquire hold;
    std::optional<py::array> w;
    try {
      const py::function f = py::get_override(static_cast<const Updater*>(this), "init");
      if (!f) return;
      w = copy_of(weights);
      f(key, *w);
    } catch (py::error_already_set& e) {
      if (w) copy_back(*w, weights);
      rethrow_python(e, "Updater.init of key " + std::to_string(key));
    }
    copy_back(*w, weights);
  }
  void update(int key, KeyArray grad, KeyArray weights) override {
    py::gil_scoped_acquire hold;
    std::optional<py::array> w;
    try {
      const py::function f = py::get_override(static_cast<const Updater*>(this), "update");
      if (!f) throw Error(ErrorCode::InvalidUsage, "Updater: the subclass defines no update()");
      const py::array g = copy_of(grad);
      w = copy_of(weights);
      f(key, g, *w);
    } catch (py::error_already_set& e) {
      if (w) copy_back(*w, weights);
      rethrow_python(e, "Updater.update");  // KeyValue's error names the key
    }
    copy_back(*w, weights);
  }
};

class PyKeyValue;

// A reference let go on the main thread, not where it is dropped: the references wait in a
// list, which one of Python's pending calls (a queue of 32) empties, whatever their number.
class HeldUntilMainThread {
 public:
  explicit HeldUntilMainThread(py::object held) : held_(std::move(held)) {}
  HeldUntilMainThread(const HeldUntilMainThread&) = delete;
  HeldUntilMainThread& operator=(const HeldUntilMainThread&) = delete;
  ~HeldUntilMainThread() {  // with the GIL
    if (!held_) return;
    bool first = false;
    {
      std::lock_guard lk(mu());
      first = waiting().empty();
      waiting().push_back(held_.release().ptr());
    }
    if (first && Py_AddPendingCall(&release_waiting, nullptr) != 0) release_waiting(nullptr);
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<PyObject*>& waiting() {
    static std::vector<PyObject*> v;
    return v;
  }
  static int release_waiting(void*) {
    std::vector<PyObject*> released;
    {
      std::lock_guard lk(mu());
      released.swap(waiting());
    }
    for (PyObject* object : released) Py_DECREF(object);
    return 0;
  }
  py::object held_;
};

// The KeyValues alive, closed by a Python atexit hook: MPI_Finalize would close them too, but
// mpi4py's runs it holding the GIL, which a callback or an Updater of theirs then waits for.
std::vector<PyKeyValue*> live_key_values;
void close_live_key_values();
// Set by synk's sys.excepthook, which Python calls for an exception that ends the program.
bool uncaught_exception = false;
// The code of a SystemExit (sys.exit) that left a KeyValue's with block, not 0: it ends the
// program without sys.excepthook.
std::optional<int> exit_code_leaving;

int exit_code_of(const py::handle& system_exit) {
  const py::object code = system_exit.attr("code");
  if (code.is_none()) return 0;
  if (!py::isinstance<py::int_>(code)) return 1;  // a message, which Python prints
  const long value = PyLong_AsLong(code.ptr());
  if (PyErr_Occurred()) {  // past a long
    PyErr_Clear();
    return 1;
  }
  return static_cast<int>(value & 0xff);
}

// The hooks, with the first KeyValue: the atexit one, and sys.excepthook wrapped.
void hook_interpreter_exit() {
  py::module_::import("atexit").attr("register")(py::cpp_function(&close_live_key_values));
  py::module_ sys = py::module_::import("sys");
  const py::object previous = sys.attr("excepthook");
  sys.attr("excepthook") = py::cpp_function(
      [previous](py::args args) {
        // (At an interactive prompt it shows every error, and the program goes on.)
        if (!py::hasattr(py::module_::import("sys"), "ps1")) uncaught_exception = true;
        previous(*args);
      });
}

class PyKeyValue {
 public:
  PyKeyValue(Communicator& comm, const py::object& updater) : updater_(updater) {
    static const bool hooked = [] {
      hook_interpreter_exit();
      return true;
    }();
    (void)hooked;
    KeyValueOptions options;
    if (!updater.is_none()) {
      if (!py::isinstance<Updater>(updater)) {
        const auto type = py::str(py::type::of(updater).attr("__name__")).cast<std::string>();
        throw py::type_error("KeyValue(comm, updater): updater must be None or a synk.Updater "
                             "(an instance of a subclass defining update(key, grad, weights)), "
                             "not " + type);
      }
      options.updater = updater.cast<std::shared_ptr<Updater>>();
    }
    {
      NoGil released;
      kv_ = std::make_unique<KeyValue>(comm, options);
    }
    live_key_values.push_back(this);
  }
  // Collective (it waits for every rank to close), so without the GIL.
  ~PyKeyValue() {
    std::erase(live_key_values, this);
    NoGil released;
    kv_.reset();
  }

  void init_key(int key, const py::array& weights, const std::string& op,
                const std::string& dtype) {
    const Buffer b = as_buffer(weights, "weights", false, dtype);
    refuse_bool(b, "weights");
    const ReduceOp rop = reduce_op(op);
    NoGil released;
    kv_->init_key(key, b.count, b.dtype, rop, b.data);
  }
  void push(int key, const py::array& a, int priority, const std::string& dtype) {
    const Buffer b = checked(key, a, "a", false, dtype);
    {
      NoGil released;
      kv_->push(key, b.data, priority);
    }
    pushed_[key].push_back(a);  // synk's until the pull_wait that ends its pull
  }
  void pull(int key, const py::array& out, int priority, const py::object& callback,
            const std::string& dtype) {
    const Buffer b = checked(key, out, "out", true, dtype);
    // Refused here, before the first pull's array and callback are let go (synk refuses it
    // too, but only after they were replaced: it would then write into a freed array).
    if (pulled_.count(key)) {
      throw Error(ErrorCode::InvalidUsage, "KeyValue.pull: key " + std::to_string(key) +
                                               " is pulled again before pull_wait of its last pull");
    }
    pulled_[key] = out;
    callbacks_[key] = callback;
    // Until synk has the pull, a pull_wait on another thread (this call is without the GIL) is
    // refused without touching the pull's arrays (it took them, and synk then wrote into a
    // freed out and read a freed push).
    // (A multiset: a pull of the key made after this one's pull_wait may register meanwhile.)
    const auto mine = registering_.insert(key);
    struct Registered {
      std::multiset<int>& keys;
      std::multiset<int>::iterator mine;
      ~Registered() { keys.erase(mine); }
    } registered{registering_, mine};
    std::function<void()> run;
    if (!callback.is_none()) run = [this, key] { call_back(key); };
    try {
      NoGil released;
      kv_->pull(key, b.data, priority, std::move(run));
    } catch (...) {
      // Refused (a KeyValue closed, failed): nothing runs. Or its result was here and the
      // callback, run at once, raised: the pull stays open for its pull_wait.
      if (!pulling(key)) {
        pulled_.erase(key);
        callbacks_.erase(key);
      }
      throw;
    }
  }
  py::object pull_wait(int key) {
    // One thread waits for a pull: a second one's bookkeeping below would race the first's
    // (and take its array). Refused here, under the GIL.
    if (!waiting_.insert(key).second) {
      throw Error(ErrorCode::InvalidUsage, "KeyValue.pull_wait: key " + std::to_string(key) +
                                               ": another thread is waiting for its pull");
    }
    struct NotWaiting {
      std::set<int>& keys;
      int key;
      ~NotWaiting() { keys.erase(key); }
    } not_waiting{waiting_, key};
    std::exception_ptr failed;
    {
      NoGil released;
      try {
        kv_->pull_wait(key);
      } catch (...) {
        failed = std::current_exception();
      }
    }
    // Refused at once (no push yet, in a callback; or a pull still being handed to synk): the
    // pull and its arrays are still synk's.
    if (failed && registering_.count(key) != 0) std::rethrow_exception(failed);
    if (failed && pulled_.count(key) != 0 && pulling(key)) std::rethrow_exception(failed);
    const auto pulled = pulled_.find(key);
    if (pulled == pulled_.end()) {  // no pull of the binding's (synk said why), or another
      if (failed) std::rethrow_exception(failed);  // thread's pull_wait ended it meanwhile
      return py::none();
    }
    py::object out = pulled->second;
    pulled_.erase(pulled);
    callbacks_.erase(key);
    // The pull's push goes: the oldest. The key's next push, which synk takes once the result
    // is here (before this pull_wait, or meanwhile from another thread), stays.
    if (auto& pushes = pushed_[key]; !pushes.empty()) pushes.pop_front();
    if (failed) std::rethrow_exception(failed);
    return out;
  }
  void close() {
    NoGil released;
    kv_->close();
  }
  void join() {
    NoGil released;
    kv_->join();
  }
  std::size_t count(int key) {
    NoGil released;
    return kv_->count(key);
  }
  int owner(int key) {
    NoGil released;
    return kv_->owner(key);
  }
  bool pulling(int key) {
    NoGil released;
    return kv_->pulling(key);
  }

 private:
  // a, checked against the key's count and dtype.
  Buffer checked(int key, const py::array& a, const char* what, bool writable,
                 const std::string& dtype) {
    const Buffer b = as_buffer(a, what, writable, dtype);
    refuse_bool(b, what);
    DataType want;
    std::size_t count;
    try {
      NoGil released;
      want = kv_->dtype(key);
      count = kv_->count(key);
    } catch (const Error& e) {
      throw Error(e.code(), std::string("KeyValue.") + (writable ? "pull" : "push") + ": key " +
                                std::to_string(key) + " was not declared (init_key)");
    }
    if (b.count != count || b.dtype != want) {
      invalid(std::string("KeyValue: key ") + std::to_string(key) + " holds " +
              std::to_string(count) + " " + to_string(want) + ", but " + what + " has " +
              std::to_string(b.count) + " " + to_string(b.dtype));
    }
    return b;
  }
  // On synk's thread (or in pull): the key's callback, with the GIL. This KeyValue is held
  // meanwhile and let go on the main thread: a callback that drops its last reference would
  // otherwise destroy it inside the cycle that runs the callback.
  void call_back(int key) {
    py::gil_scoped_acquire hold;
    // (Not inside ~PyKeyValue, whose close delivers the last results: pybind11 knows no Python
    // object for it any more, and py::cast would make one that owns it.)
    const py::handle self = py::detail::get_object_handle(
        this, py::detail::get_type_info(typeid(PyKeyValue)));
    const HeldUntilMainThread held(py::reinterpret_borrow<py::object>(self));
    try {
      callbacks_.at(key)();
    } catch (py::error_already_set& e) {
      rethrow_python(e, "the pull callback of key " + std::to_string(key));
    }
  }

  py::object updater_;  // keeps the Python Updater, which synk holds in C++ only, alive
  std::unique_ptr<KeyValue> kv_;
  std::map<int, std::deque<py::object>> pushed_;
  std::map<int, py::object> pulled_, callbacks_;
  std::set<int> waiting_;           // keys a thread waits for in pull_wait
  std::multiset<int> registering_;  // keys whose pull() is handing the pull to synk
};

// At interpreter exit, before mpi4py's MPI_Finalize (atexit runs the last registered first, and
// the first KeyValue comes after `from mpi4py import MPI`): the last made first, as MPI_Finalize
// would. An error is logged by the KeyValue; nothing is left to tell. But a program ending by an
// uncaught exception ends here, with Python's exit code for it: closing waits for every rank,
// and one waiting for this rank (in pull_wait) would fail only at its SYNK_TIMEOUT.
void close_live_key_values() {
  if (!live_key_values.empty() && (uncaught_exception || exit_code_leaving)) {
    for (const char* stream : {"stdout", "stderr"}) {
      try {
        py::module_::import("sys").attr(stream).attr("flush")();
      } catch (const py::error_already_set&) {  // (a stream closed, or None)
      }
    }
    std::_Exit(uncaught_exception ? 1 : *exit_code_leaving);
  }
  // Each held while the others close: a close releases the GIL, and another thread may drop a
  // KeyValue's last reference meanwhile (it was destroyed under the loop, a segfault).
  std::vector<std::pair<PyKeyValue*, py::object>> open;
  for (PyKeyValue* kv : live_key_values) {
    const py::handle self =
        py::detail::get_object_handle(kv, py::detail::get_type_info(typeid(PyKeyValue)));
    if (self) open.emplace_back(kv, py::reinterpret_borrow<py::object>(self));
  }
  for (auto kv = open.rbegin(); kv != open.rend(); ++kv) {
    try {
      kv->first->close();
    } catch (...) {
    }
  }
}

}  // namespace
}  // namespace synk::python

SYNK_PYTHON_MADE_ONLY(synk::python::PyKeyValue)

namespace synk::python {

void add_key_value(py::module_& m) {
  py::class_<Updater, PyUpdater, std::shared_ptr<Updater>>(
      m, "Updater",
      "Update on the owner: subclass it and define update(key, grad, weights), which changes "
      "weights in place (and optionally init(key, weights)). Runs on the key's owner rank, on "
      "synk's thread.")
      .def(py::init<>());
  const auto dtype = py::arg("dtype") = "";
  py::class_<PyKeyValue>(m, "KeyValue",
                         "mshadow-ps's push and pull by key (see docs/python.md).")
      .def(py::init<Communicator&, const py::object&>(), py::arg("comm"),
           py::arg("updater") = py::none(), py::keep_alive<1, 2>())
      .def("init_key", &PyKeyValue::init_key, py::arg("key"), py::arg("weights").noconvert(),
           py::arg("op") = "sum", py::kw_only(), dtype)
      .def("push", &PyKeyValue::push, py::arg("key"), py::arg("a").noconvert(),
           py::arg("priority") = 0, py::kw_only(), dtype)
      .def("pull", &PyKeyValue::pull, py::arg("key"), py::arg("out").noconvert(),
           py::arg("priority") = 0, py::arg("callback") = py::none(), py::kw_only(), dtype)
      .def("pull_wait", &PyKeyValue::pull_wait, py::arg("key"))
      .def("close", &PyKeyValue::close)
      .def("join", &PyKeyValue::join,
           "close() for a rank whose inputs ran out first: until every rank has joined or "
           "closed, it takes part in the keys the others push with the op's identity")
      .def("count", &PyKeyValue::count, py::arg("key"))
      .def("owner", &PyKeyValue::owner, py::arg("key"))
      .def("pulling", &PyKeyValue::pulling, py::arg("key"),
           "Whether the key has a pull that no pull_wait has ended yet")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyKeyValue& kv, const py::object& type, const py::object& value,
                          const py::object&) {
        // Not after an exception: close waits for every rank, and the others may be waiting
        // for this one (in pull_wait), which would raise only at their SYNK_TIMEOUT.
        if (type.is_none()) {
          kv.close();
        } else if (PyErr_GivenExceptionMatches(type.ptr(), PyExc_SystemExit)) {
          // sys.exit(0) on every rank still closes collectively and finalizes MPI.
          if (const int code = exit_code_of(value); code != 0) exit_code_leaving = code;
        }
      });
}

}  // namespace synk::python
