// Collectives on a list of shared variables (Synkhronos's all_reduce(params)), fused: the arrays
// of one dtype travel packed together, up to SYNK_FUSION_BYTES per collective (default 64 MiB;
// 0: each array on its own call), so that 100 small Shared variables cost about one collective,
// not 100.
//
//   synk::all_reduce(comm, {w1, b1, w2});        // Shared<float>, Shared<double>...: avg
//   synk::broadcast(comm, {w1, b1, w2}, 1);      // rank 1's values on every rank
//
// Both are collective calls: every rank of comm makes them with a list of the same length whose
// entries have, index by index, the same dtype and element count (the shapes of a Shared may
// differ by rank; only the counts must agree). The ranks compare their lists first (one small
// all_reduce), so a list that differs, a null entry or an argument the call cannot take is an
// error on every rank, naming the index in the list, and no array changes. Within each dtype the
// arrays are packed in the order of the list; an array of SYNK_FUSION_BYTES or more goes on its
// own call, in place, without a copy, as does an array that would be alone in its pack. An error
// in a collective itself (a dead rank, a timeout) may leave the arrays before it reduced.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

#include "synk/communicator.h"
#include "synk/shared.h"
#include "synk/types.h"

namespace synk {

// A type-erased reference to one array of a list collective: its elements, count, DataType and
// name (for error messages). Converts implicitly from any Shared<T>& and from a Shared<T>* (a
// null pointer is a null entry, an error in a list collective); a std::span<T> makes one
// explicitly. It refers to the Shared's current value (its data pointer and size when made): make
// it after the last change of size. A moved-from Shared holds no elements: an error in a list
// collective where the other ranks' array has some, else nothing to send.
class SharedRef {
 public:
  // Implicit on purpose, so that {w1, b1, w2} lists Shareds of different T.
  SharedRef() = default;  // a null entry
  SharedRef(std::nullptr_t) {}  // a null entry
  template <class T>
  SharedRef(Shared<T>& s)
      : data_(s.value().data()), count_(s.value().size()), dtype_(data_type_of<T>()),
        name_(s.name()), bound_(true) {}
  template <class T>
  SharedRef(Shared<T>* s) : SharedRef() {
    if (s) *this = SharedRef(*s);
  }
  // Any array of count elements of dtype (host memory); name only labels error messages.
  SharedRef(void* data, std::size_t count, DataType dtype, std::string_view name = {})
      : data_(data), count_(count), dtype_(dtype), name_(name), bound_(true) {}
  template <class T>
  explicit SharedRef(std::span<T> values, std::string_view name = {})
      : SharedRef(values.data(), values.size(), data_type_of<T>(), name) {}

  void* data() const { return data_; }
  std::size_t count() const { return count_; }
  DataType dtype() const { return dtype_; }
  std::string_view name() const { return name_; }
  std::size_t bytes() const { return count_ * size_of(dtype_); }
  bool is_null() const { return !bound_; }

 private:
  void* data_ = nullptr;
  std::size_t count_ = 0;
  DataType dtype_ = DataType::float32;
  std::string_view name_;
  bool bound_ = false;
};

// Every array of the list becomes the reduction over the ranks (default avg, as
// Shared::all_reduce). avg on an integer array is an error (on every rank, before any change).
void all_reduce(Communicator& comm, std::span<const SharedRef> list, ReduceOp op = ReduceOp::avg);
void all_reduce(Communicator& comm, std::initializer_list<SharedRef> list,
                ReduceOp op = ReduceOp::avg);
// Every array of the list takes the root's values (values only: the arrays must already have
// the same element counts on every rank; a Shared's shape is left as it is).
void broadcast(Communicator& comm, std::span<const SharedRef> list, int root = 0);
void broadcast(Communicator& comm, std::initializer_list<SharedRef> list, int root = 0);

namespace detail {

// An array of this many bytes or more runs on its own call, in place, however large the fusion
// buffer: copying it in and out of the buffer costs more than the call it saves
// (docs/measurements.md, "Lists of arrays from Python").
inline constexpr std::size_t kAloneBytes = std::size_t{64} << 10;

// How a list travels (exposed for the tests): the non-empty arrays grouped by dtype (groups in
// the order of their first array in the list), each group's arrays in list order, packed
// greedily into calls of at most fusion_bytes; then that group's arrays of fusion_bytes or
// kAloneBytes or more, one call each. A call of one array runs in place.
struct FusedPlan {
  struct Call {
    DataType dtype = DataType::float32;
    std::size_t first = 0, last = 0;  // [first, last) in order
    std::size_t count = 0;            // elements in all
  };
  std::vector<std::size_t> order;  // indices into the list
  std::vector<Call> calls;
  std::size_t pack_bytes = 0;  // the largest call of several arrays (0: none)
};
FusedPlan plan_fused(std::span<const SharedRef> list, std::size_t fusion_bytes);

}  // namespace detail

}  // namespace synk
