// See finalize_hooks.h.
#include "core/finalize_hooks.h"

#include <mpi.h>

#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "synk/error.h"

namespace synk::detail {

namespace {

std::mutex hooks_mu;
std::vector<std::function<void()>> hooks;
std::atomic<bool> finalize_started{false};

int run_hooks(MPI_Comm, int, void*, void*) {
  std::vector<std::function<void()>> todo;
  {
    std::lock_guard lk(hooks_mu);
    todo = hooks;
  }
  for (auto h = todo.rbegin(); h != todo.rend(); ++h) {
    try {  // nothing may leave MPI's callback
      (*h)();
    } catch (const std::exception& e) {
      SYNK_LOG_AT(error, "synk's work at MPI_Finalize failed: " << e.what());
    } catch (...) {
      SYNK_LOG_AT(error, "synk's work at MPI_Finalize failed");
    }
  }
  finalize_started.store(true, std::memory_order_relaxed);
  return MPI_SUCCESS;
}

}  // namespace

void at_mpi_finalize(std::function<void()> hook) {
  static const bool installed = [] {
    int key = MPI_KEYVAL_INVALID;
    return MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, run_hooks, &key, nullptr) ==
               MPI_SUCCESS &&
           MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr) == MPI_SUCCESS;
  }();
  if (!installed) SYNK_LOG_AT(warn, "MPI_Finalize cannot run synk's work before it ends MPI");
  std::lock_guard lk(hooks_mu);
  hooks.push_back(std::move(hook));
}

bool mpi_finalize_started() { return finalize_started.load(std::memory_order_relaxed); }

void refuse_after_finalize(const char* what) {
  if (!mpi_finalize_started()) return;
  throw Error(ErrorCode::InvalidUsage,
              std::string(what) + ": MPI_Finalize has been called, and synk's calls need MPI: "
                                  "make them before it");
}

}  // namespace synk::detail
