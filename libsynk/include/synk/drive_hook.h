// The master-driven mode's hook in Shared, Data and Function (synk/distribute.h): between
// serve() and close(), a collective called on the master on a registered object first brings
// every worker into the same call (a Function, which must go through Distributed::call, is
// refused). Elsewhere (SPMD, the workers, before serve()) the hook is not set and the call runs
// as it is.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace synk {
struct RowSelection;
}

namespace synk::detail {

// The collectives of a Shared or a Data that the master can drive.
enum class DrivenOp : std::int32_t {
  shared_broadcast,
  shared_broadcast_value,
  shared_all_reduce,
  shared_reduce,
  shared_reduced,
  shared_gather,
  shared_all_gather,
  shared_scatter,
  shared_scatter_rows,
  shared_get_value,
  shared_set_value,
  shared_get_shapes,
  data_set_value,
  data_resize,
  data_load,
  data_free,
};
const char* driven_op_name(DrivenOp op);  // "all_reduce", "set_value"...

// An op's own arguments (a root, a rank, a ReduceOp, nd_up, rows; resize's oversize).
struct DrivenArgs {
  std::int64_t a = 0, b = 0;
  double x = 0;
};

// Rows of a Data that an op reads (Shared::scatter from a Data): the object, which the master
// names by what it was registered as, and the selection, which travels.
struct DrivenRows {
  const void* data = nullptr;
  const RowSelection* selection = nullptr;
};

struct DriveLink;

class DriveHook {
 public:
  // On the master: sends the request that brings every worker into `op` on the object
  // registered as `name` (reading `rows` where given), then runs `here`, the master's part.
  virtual void drive(DrivenOp op, const std::string& name, const DrivenArgs& args,
                     const std::function<void()>& here, const DrivenRows* rows) = 0;
  // A registered Function called directly on the master: InvalidUsage, unless inside a request
  // (Distributed::call), since the workers would never join it.
  virtual void check_direct_call(const std::string& name) const = 0;
  // The object holding `link` is being destroyed: the hook must not touch it any more.
  virtual void unlinked(const DriveLink* link) noexcept = 0;

 protected:
  ~DriveHook() = default;
};

// What Shared and Data hold: the hook and the name they were registered under.
struct DriveLink {
  DriveHook* hook = nullptr;
  std::string name;
  DriveLink() = default;
  // A copy of a registered object is not registered: it runs its calls as they are.
  DriveLink(const DriveLink&) {}
  DriveLink& operator=(const DriveLink&) { return *this; }
  // An object destroyed while registered (declared after its Distributed, on a master that
  // unwinds) tells the hook, which then leaves it alone.
  ~DriveLink() {
    if (hook) hook->unlinked(this);
  }
  // Registers the object (Distributed::serve) or, with a null hook, unregisters it.
  void set(DriveHook* h, std::string n) {
    hook = h;
    name = std::move(n);
  }
  // Runs `here` on every rank: through the hook where one is set, else at once.
  void run(DrivenOp op, const DrivenArgs& args, const std::function<void()>& here,
           const DrivenRows* rows = nullptr) const {
    if (hook) {
      hook->drive(op, name, args, here, rows);
    } else {
      here();
    }
  }
};

}  // namespace synk::detail
