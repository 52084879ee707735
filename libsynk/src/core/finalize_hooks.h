// What synk must do while MPI still works, when the program (or synk's exit handler) calls
// MPI_Finalize: close the KeyValues, finish the non-blocking calls still queued. MPI_Finalize
// deletes MPI_COMM_SELF's attributes first; one attribute's delete callback runs the hooks,
// the last registered first, and from then on synk's calls are refused.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "core/logging.h"

namespace synk::detail {

// Registers `hook` for MPI_Finalize (MPI must be initialized). A hook must not throw.
void at_mpi_finalize(std::function<void()> hook);

// Whether MPI_Finalize has started (the hooks have run): a relaxed load, for every call.
bool mpi_finalize_started();

// Throws InvalidUsage naming `what` once MPI_Finalize has started.
void refuse_after_finalize(const char* what);

// The live objects of one kind that MPI_Finalize closes while MPI still works (the masters
// still serving, the KeyValues' engines), the last added first, as scopes end: one left open
// past the program's MPI_Finalize would make MPI calls after it, or leave its peers waiting.
// Define one `constinit` at namespace scope: made before any code runs (a static object of
// another file may add to it), and destroyed after synk's exit handler, which finalizes MPI.
template <class T>
class ClosedAtFinalize {
 public:
  // `close` closes one object; `what` names the kind in the log of a close that failed.
  constexpr ClosedAtFinalize(void (*close)(T&), const char* what) : close_(close), what_(what) {}

  void add(T* object) {
    std::call_once(hooked_, [this] { at_mpi_finalize([this] { close_all(); }); });
    std::lock_guard lk(mu_);
    std::erase(live_, object);
    live_.push_back(object);
  }

  void remove(T* object) {
    std::lock_guard lk(mu_);
    std::erase(live_, object);
  }

 private:
  void close_all() {
    std::vector<T*> open;
    {
      std::lock_guard lk(mu_);
      open = live_;
    }
    for (auto o = open.rbegin(); o != open.rend(); ++o) {
      try {  // nothing may leave MPI's callback
        close_(**o);
      } catch (const std::exception& e) {
        SYNK_LOG_AT(error, what_ << ": closing it at MPI_Finalize failed: " << e.what());
      } catch (...) {  // a user's callback's own exception
        SYNK_LOG_AT(error, what_ << ": closing it at MPI_Finalize failed");
      }
    }
  }

  void (*const close_)(T&);
  const char* const what_;
  std::once_flag hooked_;
  std::mutex mu_;
  std::vector<T*> live_;
};

}  // namespace synk::detail
