// Node-shared datasets, after Synkhronos: an N-d array (axis 0 = examples) held once per node in
// POSIX shared memory and read by every local rank without copying, and Batch, a selection of
// its rows split across the ranks at linspace boundaries.
#pragma once

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "synk/communicator.h"
#include "synk/drive_hook.h"

namespace synk {

class Distributed;

// Positions of selected rows: a strided range, or an explicit list.
struct RowSelection {
  std::size_t start = 0, count = 0, step = 1;
  std::vector<std::size_t> indices;  // when not empty, the rows themselves
  std::size_t size() const { return indices.empty() ? count : indices.size(); }
  std::size_t operator[](std::size_t i) const { return indices.empty() ? start + i * step : indices[i]; }
  bool contiguous() const { return indices.empty() && (step == 1 || count <= 1); }
  // Positions [lo, hi) of this selection.
  RowSelection part(std::size_t lo, std::size_t hi) const {
    RowSelection p;
    if (!indices.empty()) {
      p.indices.assign(indices.begin() + static_cast<std::ptrdiff_t>(lo),
                       indices.begin() + static_cast<std::ptrdiff_t>(hi));
    } else {
      p.start = start + lo * step;
      p.step = step;
      p.count = hi - lo;
    }
    return p;
  }
};

class Batch {
 public:
  static Batch all();
  static Batch first(std::size_t n);
  static Batch slice(std::size_t start, std::size_t stop, std::size_t step = 1);
  static Batch indices(std::vector<std::size_t> rows);
  // The batch that selects `sel` (a selection made by select(), as it travels).
  static Batch of(const RowSelection& sel);

  // The whole selection for a dataset of `rows` rows; throws InvalidArgument naming the first
  // index out of range.
  RowSelection select(std::size_t rows) const;
  // Rank r's share: positions [r*len/size, (r+1)*len/size) of the selection (as even as
  // possible; the first ranks get the shorter shares).
  RowSelection for_rank(std::size_t rows, int rank, int size) const;

 private:
  void check_indices(std::size_t rows) const;  // InvalidArgument naming the first bad index

  enum class Kind { all, first, slice, indices } kind_ = Kind::all;
  std::size_t a_ = 0, b_ = 0, step_ = 1;
  std::shared_ptr<const std::vector<std::size_t>> rows_;
};

namespace detail {
// Throws InvalidArgument naming the first row of sel at or past `rows` (a RowSelection can be
// built by hand; one from Batch is checked already).
void check_selection(const RowSelection& sel, std::size_t rows);

// Copies rows sel[0], sel[1], ... of a row-major array at `base` (row_bytes each) one after
// another to `out`. Random rows are latency-bound; see batch.cc for how it keeps the memory
// system busy.
void gather_rows(const unsigned char* base, std::size_t row_bytes, const RowSelection& sel,
                 unsigned char* out);

// The untyped part of Data<T>: one shared segment per node, filled once.
class DataStore {
 public:
  DataStore(const Communicator& comm, std::vector<std::size_t> shape, std::size_t elem_size,
            double oversize);
  ~DataStore();
  DataStore(const DataStore&) = delete;
  DataStore& operator=(const DataStore&) = delete;

  void set_value(const void* values, std::size_t bytes);  // rank 0's bytes reach every node
  void load(const std::function<void(void* data)>& loader);  // run by each node's local rank 0
  void resize(std::size_t rows, double oversize);
  void free();
  const std::vector<std::size_t>& shape() const { return shape_; }
  std::size_t row_elems() const { return row_elems_; }
  std::size_t capacity_rows() const { return capacity_rows_; }
  const unsigned char* bytes() const;
  unsigned char* writable_bytes();
  const std::string& segment_name() const;
  // Keeps the current segment mapped while held, even past a resize() that moves the rows or
  // a free(): for views of bytes() that may outlive them (the Python binding's arrays).
  std::shared_ptr<const void> mapping() const;

 private:
  void allocate(std::size_t capacity_rows, const unsigned char* keep, std::size_t keep_bytes);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<std::size_t> shape_;
  std::size_t elem_size_ = 0, row_elems_ = 1, capacity_rows_ = 0;
};
}  // namespace detail

// This rank's rows of a batch: a view into shared memory when they are contiguous, otherwise
// a copy. rows() x row_elems() elements, row-major.
template <class T>
struct BatchRows {
  std::span<const T> values;
  std::size_t rows = 0;
  std::vector<T> owned;  // the copy, when one was needed
  // The node's segment, when values view it: held, so that the view stays readable (with the
  // old rows) after a resize that moves the data or a free(), as Python's views do.
  std::shared_ptr<const void> segment;

  BatchRows() = default;
  // A copy of rows held in `owned` views its own copy of them, not the original's (which may
  // be gone by the time the copy is read).
  BatchRows(const BatchRows& o)
      : values(o.values), rows(o.rows), owned(o.owned), segment(o.segment) {
    repoint(o);
  }
  BatchRows& operator=(const BatchRows& o) {
    if (this != &o) {
      values = o.values;
      rows = o.rows;
      owned = o.owned;
      segment = o.segment;
      repoint(o);
    }
    return *this;
  }
  // A move keeps the vector's buffer, and so the view.
  BatchRows(BatchRows&&) noexcept = default;
  BatchRows& operator=(BatchRows&&) noexcept = default;

 private:
  void repoint(const BatchRows& o) {
    if (!o.owned.empty() && o.values.data() == o.owned.data()) {
      values = std::span<const T>(owned.data(), o.values.size());
    }
  }
};

template <class T>
class Data {
 public:
  // Collective over comm. shape[0] is the number of rows; oversize in [1, 2] reserves room to
  // grow (resize) without a new segment.
  Data(const Communicator& comm, std::vector<std::size_t> shape, double oversize = 1.0)
      : store_(comm, std::move(shape), sizeof(T), oversize) {}

  // The changes below are collective: every rank calls them, SPMD; in master-driven mode
  // (synk/distribute.h), the master alone, which brings the workers into them.

  // Rank 0's values (size() of them; ignored elsewhere) fill every node's copy.
  void set_value(std::span<const T> values) {
    link_.run(detail::DrivenOp::data_set_value, {},
              [&] { store_.set_value(values.data(), values.size_bytes()); });
  }
  // loader(pointer to size() elements) runs once per node, on its local rank 0. In
  // master-driven mode the master's node runs `loader` and the others the loader their ranks
  // registered with Distributed::add.
  void load(const std::function<void(T*)>& loader) {
    link_.run(detail::DrivenOp::data_load, {},
              [&] { store_.load([&](void* p) { loader(static_cast<T*>(p)); }); });
  }
  // New row count, contents kept up to the smaller one; new rows are zeros.
  void resize(std::size_t rows, double oversize = 1.0) {
    link_.run(detail::DrivenOp::data_resize, {static_cast<std::int64_t>(rows), 0, oversize},
              [&] { store_.resize(rows, oversize); });
  }
  void free() {
    link_.run(detail::DrivenOp::data_free, {}, [&] { store_.free(); });
  }

  const std::vector<std::size_t>& shape() const { return store_.shape(); }
  std::size_t rows() const { return store_.shape().empty() ? 0 : store_.shape()[0]; }
  std::size_t row_elems() const { return store_.row_elems(); }
  std::size_t size() const { return rows() * row_elems(); }
  const T* data() const { return reinterpret_cast<const T*>(store_.bytes()); }
  // The node segment's name, for logs and tests: "memfd:synk-..." (anonymous, never in
  // /dev/shm) or "/synk-..." (named, unlinked once every local rank mapped it).
  const std::string& segment_name() const { return store_.segment_name(); }
  std::span<const T> row_span(std::size_t begin, std::size_t end) const {
    return {data() + begin * row_elems(), (end - begin) * row_elems()};
  }

  // This rank's share of the batch (split with every rank of the communicator).
  BatchRows<T> take(const Batch& batch, int rank, int size) const {
    return take(batch.for_rank(rows(), rank, size));
  }
  BatchRows<T> take(const RowSelection& sel) const {
    BatchRows<T> out;
    out.values = take(sel, out.owned);
    out.rows = sel.size();
    if (!out.values.empty() && out.values.data() != out.owned.data()) {
      out.segment = store_.mapping();
    }
    return out;
  }
  // The same into a buffer the caller reuses from batch to batch (no allocation once it is
  // large enough): a view into shared memory when the rows are contiguous, else into buffer.
  // That view, like data() and row_span(), lasts until a resize that moves the data or free().
  std::span<const T> take(const RowSelection& sel, std::vector<T>& buffer) const {
    detail::check_selection(sel, rows());
    const std::size_t re = row_elems();
    if (sel.contiguous()) {
      return sel.size() ? row_span(sel.start, sel.start + sel.size()) : std::span<const T>();
    }
    buffer.resize(sel.size() * re);
    detail::gather_rows(store_.bytes(), re * sizeof(T), sel,
                        reinterpret_cast<unsigned char*>(buffer.data()));
    return buffer;
  }

 private:
  friend class Distributed;  // sets link_ (synk/distribute.h)
  detail::DataStore store_;
  // Set on the master while a Distributed serves; mutable: a Data added read only (const)
  // refuses changes through it.
  mutable detail::DriveLink link_;
};

}  // namespace synk
