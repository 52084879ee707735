// Shared<T>, after Synkhronos's shared variables: a named array that exists on every rank (each
// rank holds its own value and shape) with collectives over the ranks' values. Every collective
// is a collective call: all ranks of the communicator make it, in the same order.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "synk/agreement.h"
#include "synk/communicator.h"
#include "synk/data.h"
#include "synk/drive_hook.h"

namespace synk {

class Distributed;

namespace detail {

// The shape of the ranks' values gathered (Shared and DeviceShared): nd_up 1 stacks values of
// one shape ([n, ...]); nd_up 0 joins them along axis 0 (their rows may differ in number, not
// in shape). `who` ("Shared 'w'") starts the error messages.
inline std::vector<std::size_t> join_shapes(const std::vector<std::vector<std::size_t>>& shapes,
                                            int nd_up, const std::string& who) {
  if (nd_up == 1) {
    for (const auto& s : shapes) {
      if (s != shapes[0]) {
        throw Error(ErrorCode::InvalidUsage,
                    who + ": gather(nd_up=1) stacks values of one shape, but the ranks' shapes "
                          "differ");
      }
    }
    std::vector<std::size_t> out{shapes.size()};
    out.insert(out.end(), shapes[0].begin(), shapes[0].end());
    return out;
  }
  if (nd_up != 0) throw Error(ErrorCode::InvalidArgument, who + ": gather: nd_up must be 0 or 1");
  std::vector<std::size_t> out = shapes[0];
  out[0] = 0;
  for (const auto& s : shapes) {
    if (s.size() != out.size() || !std::equal(s.begin() + 1, s.end(), out.begin() + 1)) {
      throw Error(ErrorCode::InvalidUsage,
                  who + ": gather(nd_up=0) joins rows of one shape, but the ranks' rows differ");
    }
    out[0] += s[0];
  }
  return out;
}

// InvalidArgument "<who> <op>: rank R is out of range for N ranks" unless 0 <= rank < size:
// the same on every rank, so all of them throw (Shared's and DeviceShared's set_value...).
inline void check_rank_in_range(const std::string& who, const char* op, int rank, int size) {
  if (rank < 0 || rank >= size) {
    throw Error(ErrorCode::InvalidArgument, who + " " + op + ": rank " + std::to_string(rank) +
                                                " is out of range for " + std::to_string(size) +
                                                " ranks");
  }
}

}  // namespace detail

template <class T>
class Shared {
 public:
  using Shape = std::vector<std::size_t>;

  Shared(Communicator& comm, std::string name, std::vector<T> value = {}, Shape shape = {})
      : comm_(&comm), name_(std::move(name)) {
    set_local(std::move(value), std::move(shape));
  }

  const std::string& name() const { return name_; }
  std::vector<T>& value() { return value_; }
  const std::vector<T>& value() const { return value_; }
  const Shape& shape() const { return shape_; }
  // This rank's value; an empty shape means a 1-d array of value.size() elements.
  void set_local(std::vector<T> value, Shape shape = {}) {
    const std::string e = try_set_local("set_local", std::move(value), std::move(shape));
    if (!e.empty()) throw Error(ErrorCode::InvalidArgument, e);
  }

  // The collectives below are called by every rank, SPMD; in master-driven mode
  // (synk/distribute.h), by the master alone, which brings the workers into them.

  // The root's value (and shape) on every rank.
  void broadcast(int root = 0) {
    link_.run(detail::DrivenOp::shared_broadcast, {root, 0, 0}, [&] { broadcast_checked(root, {}); });
  }
  // `value` (as given on rank 0) on every rank. A value that does not fill its shape is an
  // error on every rank, and nothing changes.
  void broadcast(const std::vector<T>& value, Shape shape = {}) {
    link_.run(detail::DrivenOp::shared_broadcast_value, {}, [&] {
      std::string rejected;
      if (comm_->rank() == 0) rejected = try_set_local("broadcast", value, std::move(shape));
      broadcast_checked(0, rejected);
    });
  }

  // Every rank's value becomes the reduction over the ranks (default avg).
  void all_reduce(ReduceOp op = ReduceOp::avg) {
    link_.run(detail::DrivenOp::shared_all_reduce, {static_cast<std::int64_t>(op), 0, 0}, [&] {
      comm_->all_reduce(value_.data(), value_.data(), value_.size(), data_type_of<T>(), op);
    });
  }
  // The root's value becomes the reduction; the others keep theirs.
  void reduce(ReduceOp op = ReduceOp::avg, int root = 0) {
    link_.run(detail::DrivenOp::shared_reduce, {static_cast<std::int64_t>(op), root, 0}, [&] {
      comm_->reduce(value_.data(), value_.data(), value_.size(), data_type_of<T>(), op, root);
    });
  }
  // The reduction, returned at the root (empty elsewhere); no rank's value changes.
  std::vector<T> reduced(ReduceOp op = ReduceOp::avg, int root = 0) {
    std::vector<T> out;
    link_.run(detail::DrivenOp::shared_reduced, {static_cast<std::int64_t>(op), root, 0}, [&] {
      out.resize(comm_->rank() == root ? value_.size() : 0);
      comm_->reduce(value_.data(), out.data(), value_.size(), data_type_of<T>(), op, root);
    });
    return out;
  }

  // Every rank's value, at the root (empty elsewhere). nd_up 1 stacks them (shape [n, ...],
  // all shapes equal); nd_up 0 concatenates them along axis 0 (their rows may differ).
  std::vector<T> gather(int nd_up = 1, int root = 0, Shape* out_shape = nullptr) {
    std::vector<T> out;
    link_.run(detail::DrivenOp::shared_gather, {nd_up, root, 0},
              [&] { out = gather_here(nd_up, root, out_shape); });
    return out;
  }
  std::vector<T> all_gather(int nd_up = 1, Shape* out_shape = nullptr) {
    std::vector<T> out;
    link_.run(detail::DrivenOp::shared_all_gather, {nd_up, 0, 0}, [&] {
      Shape joined;
      out = gather_here(nd_up, 0, &joined);
      std::vector<std::uint64_t> n{out.size()};
      comm_->broadcast(n.data(), 1, DataType::uint64, 0);
      out.resize(n[0]);
      comm_->broadcast(out.data(), out.size(), data_type_of<T>(), 0);
      if (out_shape) *out_shape = joined;
    });
    return out;
  }

  // The root's value split along axis 0 at linspace boundaries: rank r's value becomes rows
  // [r*rows/n, (r+1)*rows/n). Each rank receives only its rows (one scatterv).
  void scatter(int root = 0) {
    link_.run(detail::DrivenOp::shared_scatter, {root, 0, 0}, [&] { scatter_here(root); });
  }
  // Rank r's value becomes its linspace share of the batch's rows of `data` (as Data::take
  // gives it), copied straight out of the node's segment: nothing travels between the ranks,
  // and each holds only its share. `data` must be registered too in master-driven mode.
  void scatter(const Data<T>& data, const Batch& batch = Batch::all()) {
    const std::string e = shape_error("scatter", 0, data.shape(), true);
    if (!e.empty()) throw Error(ErrorCode::InvalidArgument, e);  // the same on every rank
    const RowSelection sel = batch.select(data.rows());
    const detail::DrivenRows rows{&data, &sel};
    link_.run(detail::DrivenOp::shared_scatter_rows, {}, [&] { scatter_rows(data, sel); }, &rows);
  }

  // Rank `rank`'s value (and shape), returned on every rank (in master-driven mode, on the
  // master).
  std::vector<T> get_value(int rank, Shape* out_shape = nullptr) {
    std::vector<T> out;
    link_.run(detail::DrivenOp::shared_get_value, {rank, 0, 0},
              [&] { out = get_value_here(rank, out_shape); });
    return out;
  }
  // Rank `rank`'s value becomes `value` as given on rank 0 (in master-driven mode, the master).
  void set_value(int rank, const std::vector<T>& value, Shape shape = {}) {
    link_.run(detail::DrivenOp::shared_set_value, {rank, 0, 0},
              [&] { set_value_here(rank, value, std::move(shape)); });
  }
  // Every rank's shape, on every rank.
  std::vector<Shape> get_shapes() {
    std::vector<Shape> shapes;
    link_.run(detail::DrivenOp::shared_get_shapes, {}, [&] { shapes = get_shapes_here(); });
    return shapes;
  }

 private:
  friend class Distributed;  // sets link_ (synk/distribute.h)
  static constexpr std::size_t kMaxDims = 8;

  std::vector<T> gather_here(int nd_up, int root, Shape* out_shape) {
    const std::vector<Shape> shapes = get_shapes_here("gather");
    const Shape joined = join(shapes, nd_up);
    std::vector<std::size_t> counts(shapes.size());
    for (std::size_t r = 0; r < shapes.size(); ++r) counts[r] = elems(shapes[r]);
    std::vector<T> out(comm_->rank() == root ? elems(joined) : 0);
    comm_->gatherv(value_.data(), value_.size(), out.data(), counts, data_type_of<T>(), root);
    if (out_shape) *out_shape = joined;
    return out;
  }
  // Rank r's rows [lo, hi) of `rows` split at linspace boundaries over the ranks.
  std::pair<std::size_t, std::size_t> share(std::size_t rows, int r) const {
    const auto n = static_cast<std::size_t>(comm_->size()), ur = static_cast<std::size_t>(r);
    return {rows * ur / n, rows * (ur + 1) / n};
  }
  void scatter_here(int root) {
    // value() may have been resized by hand: the counts come from the shape.
    const std::string mismatch =
        value_.size() == elems(shape_)
            ? std::string()
            : "Shared '" + name_ + "': scatter: the root's " + std::to_string(value_.size()) +
                  " values do not fill its shape";
    Shape s = root_shape(root, mismatch);
    if (s.empty()) s = {0};
    const std::size_t row = elems(Shape(s.begin() + 1, s.end()));
    std::vector<std::size_t> counts(static_cast<std::size_t>(comm_->size()));
    for (int r = 0; r < comm_->size(); ++r) {
      const auto [lo, hi] = share(s[0], r);
      counts[static_cast<std::size_t>(r)] = (hi - lo) * row;
    }
    const std::size_t mine = counts[static_cast<std::size_t>(comm_->rank())];
    std::vector<T> out(mine);
    comm_->scatterv(value_.data(), counts, out.data(), mine, data_type_of<T>(), root);
    const auto [lo, hi] = share(s[0], comm_->rank());
    value_ = std::move(out);
    shape_ = std::move(s);
    shape_[0] = hi - lo;
  }
  void scatter_rows(const Data<T>& data, const RowSelection& sel) {
    const auto [lo, hi] = share(sel.size(), comm_->rank());
    const BatchRows<T> rows = data.take(sel.part(lo, hi));
    value_.assign(rows.values.begin(), rows.values.end());
    shape_ = data.shape();
    shape_[0] = hi - lo;
  }
  std::vector<T> get_value_here(int rank, Shape* out_shape) {
    detail::check_rank_in_range("Shared '" + name_ + "'", "get_value", rank, comm_->size());
    std::vector<T> keep = value_;
    Shape keep_shape = shape_;
    broadcast_checked(rank, {}, "get_value");
    std::vector<T> out = std::move(value_);
    if (out_shape) *out_shape = shape_;
    value_ = std::move(keep);
    shape_ = std::move(keep_shape);
    return out;
  }
  void set_value_here(int rank, const std::vector<T>& value, Shape shape) {
    detail::check_rank_in_range("Shared '" + name_ + "'", "set_value", rank, comm_->size());
    Shared<T> carrier(*comm_, name_);
    std::string rejected;
    if (comm_->rank() == 0) rejected = carrier.try_set_local("set_value", value, std::move(shape));
    carrier.broadcast_checked(0, rejected);
    if (comm_->rank() == rank) {
      value_ = std::move(carrier.value_);
      shape_ = std::move(carrier.shape_);
    }
  }
  // Every rank's shape. For a call that sends the values (`sending`, its name), a rank whose
  // value() was resized by hand, so that it no longer fills its shape, is refused on every
  // rank: its record says so, with both sizes, instead of its shape.
  std::vector<Shape> get_shapes_here(const char* sending = nullptr) {
    static constexpr std::uint64_t kUnfilled = ~std::uint64_t{0};
    std::vector<std::uint64_t> mine = encode(shape_);
    if (sending != nullptr && value_.size() != elems(shape_)) {
      mine = {kUnfilled, value_.size(), elems(shape_)};
      mine.resize(kMaxDims + 1, 0);
    }
    std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(comm_->size()));
    comm_->all_gather(mine.data(), all.data(), mine.size(), DataType::uint64);
    std::vector<Shape> shapes;
    for (int r = 0; r < comm_->size(); ++r) {
      const std::size_t first = static_cast<std::size_t>(r) * (kMaxDims + 1);
      const auto at = all.begin() + static_cast<std::ptrdiff_t>(first);
      if (*at == kUnfilled) {
        throw Error(ErrorCode::InvalidArgument,
                    "Shared '" + name_ + "': " + sending + ": rank " + std::to_string(r) + "'s " +
                        std::to_string(at[1]) + " values do not fill its shape of " +
                        std::to_string(at[2]) + " (was value() resized by hand?)");
      }
      shapes.push_back(decode({at, at + static_cast<std::ptrdiff_t>(kMaxDims + 1)}));
    }
    return shapes;
  }

  static std::size_t elems(const Shape& s) {
    return std::accumulate(s.begin(), s.end(), std::size_t{1}, std::multiplies<>());
  }
  // set_local, but a rejected value is returned as the error's text instead of thrown: for rank
  // 0's value in a broadcast, every rank then throws (rank 0 threw alone, and the others waited
  // in the broadcast).
  std::string try_set_local(const char* what, std::vector<T> value, Shape shape) {
    if (shape.empty()) shape = {value.size()};
    std::string e = shape_error(what, value.size(), shape);
    if (e.empty()) {
      value_ = std::move(value);
      shape_ = std::move(shape);
    }
    return e;
  }
  // The root's shape on every rank; where `root_error` is not empty on the root, every rank
  // throws it instead (InvalidArgument), and no value changes.
  Shape root_shape(int root, const std::string& root_error) {
    static constexpr std::uint64_t kRejected = ~std::uint64_t{0};
    std::vector<std::uint64_t> dims = encode(shape_);
    if (comm_->rank() == root && !root_error.empty()) dims[0] = kRejected;
    comm_->broadcast(dims.data(), dims.size(), DataType::uint64, root);
    if (dims[0] == kRejected) {  // the root's reason follows, for every rank's message
      const std::string text = text_from(*comm_, root, root_error);
      throw Error(ErrorCode::InvalidArgument,
                  comm_->rank() == root ? root_error : "rank " + std::to_string(root) + ": " + text);
    }
    return decode(dims);
  }
  // broadcast(root), where the root's value was rejected if `root_error` is not empty (on the
  // root), or does not fill its shape (value() resized by hand; `what` names the call): then
  // every rank throws, and no value changes.
  void broadcast_checked(int root, std::string root_error, const char* what = "broadcast") {
    if (root_error.empty() && comm_->rank() == root && value_.size() != elems(shape_)) {
      root_error = "Shared '" + name_ + "': " + what + ": rank " + std::to_string(root) + "'s " +
                   std::to_string(value_.size()) + " values do not fill its shape of " +
                   std::to_string(elems(shape_)) + " (was value() resized by hand?)";
    }
    Shape s = root_shape(root, root_error);
    value_.resize(elems(s));
    shape_ = std::move(s);
    comm_->broadcast(value_.data(), value_.size(), data_type_of<T>(), root);
  }
  // Why n values cannot have shape s, or empty where they can (dims_only: only its dimensions).
  std::string shape_error(const char* what, std::size_t n, const Shape& s,
                          bool dims_only = false) const {
    const std::string head = "Shared '" + name_ + "': " + what + ": ";
    if (s.size() > kMaxDims) {
      return head + "a shape of " + std::to_string(s.size()) + " dimensions (at most " +
             std::to_string(kMaxDims) + ")";
    }
    if (dims_only) return {};
    if (elems(s) != n) return head + std::to_string(n) + " values do not fill the shape";
    return {};
  }
  // [ndim, d0, d1, ..., 0 padding] so every rank's record has one size.
  static std::vector<std::uint64_t> encode(const Shape& s) {
    std::vector<std::uint64_t> out(kMaxDims + 1, 0);
    out[0] = s.size();
    for (std::size_t i = 0; i < s.size(); ++i) out[i + 1] = s[i];
    return out;
  }
  static Shape decode(const std::vector<std::uint64_t>& d) {
    return Shape(d.begin() + 1, d.begin() + 1 + static_cast<std::ptrdiff_t>(d[0]));
  }
  Shape join(const std::vector<Shape>& shapes, int nd_up) const {
    return detail::join_shapes(shapes, nd_up, "Shared '" + name_ + "'");
  }

  Communicator* comm_;
  std::string name_;
  std::vector<T> value_;
  Shape shape_;
  detail::DriveLink link_;  // set on the master while a Distributed serves
};

}  // namespace synk
