// NoGil: the GIL released in its scope (`NoGil released;`), as py::gil_scoped_release does,
// but safe for a daemon thread at exit. CPython (before 3.14) ends a thread other than the one
// finalizing the interpreter when it retakes the GIL, with pthread_exit, whose unwinding through
// pybind11's noexcept destructor (or through an exception synk threw as MPI went away) called
// std::terminate: a program with a thread still making synk calls aborted at exit (signal 6).
// Such a thread now waits for the process to end instead, as CPython 3.14 makes it.
#pragma once

#include <Python.h>
#include <pythread.h>

#include <chrono>
#include <exception>
#include <optional>
#include <thread>
#include <type_traits>

namespace synk::python {

// The main thread, which finalizes the interpreter (set when the module is imported).
inline unsigned long main_thread_ident = 0;

// Whether retaking the GIL would end this thread: the interpreter finalizes, on another thread.
inline bool retaking_the_gil_ends_this_thread() {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing() != 0;
#else
  const bool finalizing = _Py_IsFinalizing() != 0;
#endif
  return finalizing && PyThread_get_thread_ident() != main_thread_ident;
}

class NoGil {
 public:
  NoGil() : state_(PyEval_SaveThread()) {}
  ~NoGil() noexcept(false) {
    while (retaking_the_gil_ends_this_thread()) std::this_thread::sleep_for(std::chrono::hours(1));
    PyEval_RestoreThread(state_);
  }
  NoGil(const NoGil&) = delete;
  NoGil& operator=(const NoGil&) = delete;

 private:
  PyThreadState* state_;
};

// f() without the GIL; what it throws is rethrown once the GIL is back. A NoGil left by an
// exception retakes the GIL while it unwinds, and where that ends the thread (a daemon thread
// blocked for the GIL as the interpreter starts to finalize), its unwinding meets the exception
// in flight: std::terminate. Here the GIL is retaken in the normal flow.
template <class F>
auto without_gil(F&& f) -> decltype(f()) {
  using Result = decltype(f());
  std::exception_ptr failed;
  if constexpr (std::is_void_v<Result>) {
    {
      const NoGil released;
      try {
        f();
      } catch (...) {
        failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
  } else {
    std::optional<Result> result;
    {
      const NoGil released;
      try {
        result.emplace(f());
      } catch (...) {
        failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
    return std::move(*result);
  }
}

}  // namespace synk::python
