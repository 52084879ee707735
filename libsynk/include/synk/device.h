// Device memory for GPU nodes: named device contexts (SYNK_CONTEXTS), device buffers with
// host<->device copies, shared variables whose value lives on a device (collectives through the
// nccl backend), and Data rows staged to the device through reused pinned host buffers.
//
// No CUDA header here, so programs that never touch a GPU compile without the toolkit: a
// stream is `synk::Stream` (CUDA's own cudaStream_t is the same type, `CUstream_st*`). In a build
// without CUDA/NCCL every type below exists and its constructors throw NotSupported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "synk/communicator.h"
#include "synk/data.h"
#include "synk/error.h"
#include "synk/shared.h"
#include "synk/types.h"

struct CUstream_st;  // CUDA's stream object; cudaStream_t is CUstream_st*

namespace synk {

using Stream = ::CUstream_st*;  // a cudaStream_t; nullptr means "synk's own stream"

// The number of CUDA devices this rank sees. Throws NotSupported, with CUDA's reason, when it
// sees none, and in a build without CUDA/NCCL.
int device_count();

// The device (N of cudaN, an index among this rank's visible devices) that SYNK_CONTEXTS maps
// `context` to: with SYNK_CONTEXTS="main->cuda0;aux->cuda1", device_for("aux") is 1. With
// `synkrun --gpus-per-rank K` a rank sees its K GPUs as cuda0..cuda(K-1). Throws InvalidArgument
// for an unknown name (naming the names the map has) and for "cpu" or an empty name. A lookup
// only: whether the device is visible is checked where memory is placed on it.
int device_for(std::string_view context);
// The names of SYNK_CONTEXTS, in the map's order (empty when it is not set).
std::vector<std::string> context_names();

// Bytes of device memory on one device, freed with the buffer. Copies to and from the host are
// blocking, with the SYNK_TIMEOUT deadline.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;  // no memory, no device
  // `bytes` on CUDA device `device` (an index among the visible devices). Throws NotSupported
  // without a visible device or CUDA, InvalidArgument for a device that is not visible.
  DeviceBuffer(std::size_t bytes, int device);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  int device() const { return device_; }

  // bytes of host memory at src into the buffer at `offset`; InvalidArgument past the end.
  void copy_from_host(const void* src, std::size_t bytes, std::size_t offset = 0);
  void copy_to_host(void* dst, std::size_t bytes, std::size_t offset = 0) const;

 private:
  void release() noexcept;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = -1;
};

namespace detail {
// The untyped part of DeviceShared<T>: the device array, its device, and the collectives on it.
class DeviceValue {
 public:
  // Throws NotSupported when the build has no CUDA/NCCL or comm's backend is not nccl.
  DeviceValue(Communicator& comm, const std::string& name, const std::string& context,
              DataType dtype);
  ~DeviceValue();
  DeviceValue(DeviceValue&&) noexcept;
  DeviceValue& operator=(DeviceValue&&) noexcept;

  int device() const;
  std::size_t count() const;
  void* data() const;
  void assign(const void* host, std::size_t count);  // reallocates when count changes
  void read(void* host, std::size_t count) const;    // count must be count()
  // Collective. broadcast sends root's count over MPI first, so other ranks may differ.
  void broadcast(int root, std::vector<std::uint64_t>& dims);
  void all_reduce(ReduceOp op);
  void reduce(ReduceOp op, int root);
  // Collective. Every rank's value in rank order (counts[r] elements from rank r), at the root
  // in a new buffer on this value's device; an empty buffer elsewhere.
  DeviceBuffer gatherv(int root, const std::vector<std::size_t>& counts);
  // Collective. The root's `buffer` (count elements on this value's device) to every rank; the
  // others' buffers are replaced by ones of that size.
  void broadcast_buffer(DeviceBuffer& buffer, std::size_t count, int root);
  DeviceBuffer copy() const;                       // the value, in a new buffer on its device
  void keep(std::size_t first, std::size_t count);  // the value becomes [first, first + count)
  void take(DeviceBuffer buffer, std::size_t count);  // the value becomes `buffer`'s elements

  // Collectives over MPI, for shapes (host memory; the communicator's calls take device memory).
  void share_dims(int root, std::vector<std::uint64_t>& dims);  // root's dims to every rank
  std::vector<std::vector<std::uint64_t>> all_dims(const std::vector<std::uint64_t>& mine);
  bool root_says(int root, bool ok);  // the root's `ok` on every rank

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
}  // namespace detail

// A shared variable (synk::Shared) whose value lives in device memory: on the communicator's
// NCCL device, or on the device a context name of SYNK_CONTEXTS maps to. Collectives run on the
// device through the nccl backend (a value on another device than the NCCL one is staged through
// it with peer copies). Host copies are explicit: to_device() and to_host().
template <class T>
class DeviceShared {
 public:
  using Shape = std::vector<std::size_t>;

  // Throws NotSupported when the build has no CUDA/NCCL or comm's backend is not nccl, and
  // InvalidArgument for an unknown context or one whose device this rank does not see.
  // `context` empty: the communicator's NCCL device. Not collective.
  DeviceShared(Communicator& comm, std::string name, std::span<const T> value = {},
               Shape shape = {}, const std::string& context = {})
      : comm_(&comm), name_(std::move(name)), value_(comm, name_, context, data_type_of<T>()) {
    to_device(value, std::move(shape));
  }

  const std::string& name() const { return name_; }
  const Shape& shape() const { return shape_; }
  std::size_t size() const { return value_.count(); }
  int device() const { return value_.device(); }
  T* data() { return static_cast<T*>(value_.data()); }  // device pointer
  const T* data() const { return static_cast<const T*>(value_.data()); }

  // Host -> device: this rank's value becomes `values` (empty shape: 1-d). Blocking.
  void to_device(std::span<const T> values, Shape shape = {}) {
    if (shape.empty()) shape = {values.size()};
    if (elems(shape) != values.size()) {
      throw Error(ErrorCode::InvalidArgument, "DeviceShared '" + name_ +
                                                  "': " + std::to_string(values.size()) +
                                                  " values do not fill the shape");
    }
    value_.assign(values.data(), values.size());
    shape_ = std::move(shape);
  }
  void to_device(const Shared<T>& host) { to_device(host.value(), host.shape()); }
  // Device -> host. Blocking.
  std::vector<T> to_host() const {
    std::vector<T> out(value_.count());
    value_.read(out.data(), out.size());
    return out;
  }
  void to_host(Shared<T>& host) const { host.set_local(to_host(), shape_); }

  // Collectives, every rank of the communicator in the same order. As with NCCL, all_reduce and
  // reduce need the same number of elements on every rank (SYNK_CHECK_CALLS=1 checks it);
  // broadcast gives every rank the root's shape. They run on the communicator's stream
  // (set_stream's, else synk's own non-blocking one) and return once complete; device work of
  // the caller's on another stream that writes data() must be complete before the call
  // (synchronize it), since that stream is not ordered with synk's.
  void broadcast(int root = 0) {
    std::vector<std::uint64_t> dims(shape_.begin(), shape_.end());
    value_.broadcast(root, dims);
    shape_.assign(dims.begin(), dims.end());
  }
  void all_reduce(ReduceOp op = ReduceOp::avg) { value_.all_reduce(op); }
  void reduce(ReduceOp op = ReduceOp::avg, int root = 0) { value_.reduce(op, root); }

  // As Shared's, with the results in device memory (on this value's device): every rank's
  // value at the root (an empty buffer elsewhere); nd_up 1 stacks them (shape [n, ...], all
  // shapes equal), nd_up 0 joins them along axis 0 (their rows may differ in number).
  DeviceBuffer gather(int nd_up = 1, int root = 0, Shape* out_shape = nullptr) {
    const std::vector<Shape> shapes = get_shapes();
    const Shape joined = detail::join_shapes(shapes, nd_up, "DeviceShared '" + name_ + "'");
    std::vector<std::size_t> counts;
    for (const Shape& s : shapes) counts.push_back(elems(s));
    DeviceBuffer out = value_.gatherv(root, counts);
    if (out_shape) *out_shape = joined;
    return out;
  }
  // gather's result on every rank.
  DeviceBuffer all_gather(int nd_up = 1, Shape* out_shape = nullptr) {
    Shape joined;
    DeviceBuffer out = gather(nd_up, 0, &joined);
    value_.broadcast_buffer(out, elems(joined), 0);
    if (out_shape) *out_shape = joined;
    return out;
  }
  // The root's value split along axis 0 at linspace boundaries: rank r's value becomes rows
  // [r*rows/n, (r+1)*rows/n). (It travels as one broadcast; each rank keeps its rows.)
  void scatter(int root = 0) {
    broadcast(root);
    const std::size_t rows = shape_.empty() ? 0 : shape_[0];
    const std::size_t row = rows ? size() / rows : 0;
    const std::size_t n = static_cast<std::size_t>(comm_->size());
    const std::size_t r = static_cast<std::size_t>(comm_->rank());
    const std::size_t lo = rows * r / n, hi = rows * (r + 1) / n;
    value_.keep(lo * row, (hi - lo) * row);
    if (!shape_.empty()) shape_[0] = hi - lo;
  }
  // Rank `rank`'s value on every rank, in device memory, and its shape.
  DeviceBuffer get_value(int rank, Shape* out_shape = nullptr) {
    check_rank("get_value", rank);
    std::vector<std::uint64_t> dims(shape_.begin(), shape_.end());
    value_.share_dims(rank, dims);
    const Shape shape(dims.begin(), dims.end());
    DeviceBuffer out = comm_->rank() == rank ? value_.copy() : DeviceBuffer();
    value_.broadcast_buffer(out, elems(shape), rank);
    if (out_shape) *out_shape = shape;
    return out;
  }
  // Rank `rank`'s value becomes `values` (empty shape: 1-d) as given on rank 0; the other ranks'
  // arguments are not read. Values that do not fill the shape are an error on every rank.
  void set_value(int rank, std::span<const T> values, Shape shape = {}) {
    check_rank("set_value", rank);
    if (shape.empty()) shape = {values.size()};
    const bool fits = elems(shape) == values.size();
    if (!value_.root_says(0, fits)) {
      throw Error(ErrorCode::InvalidArgument, "DeviceShared '" + name_ +
                                                  "' set_value: rank 0's values do not fill "
                                                  "its shape");
    }
    std::vector<std::uint64_t> dims(shape.begin(), shape.end());
    value_.share_dims(0, dims);
    const std::size_t n = elems(Shape(dims.begin(), dims.end()));
    DeviceBuffer carrier;
    if (comm_->rank() == 0) {
      carrier = DeviceBuffer(n * sizeof(T), device());
      carrier.copy_from_host(values.data(), n * sizeof(T));
    }
    value_.broadcast_buffer(carrier, n, 0);
    if (comm_->rank() == rank) {
      value_.take(std::move(carrier), n);
      shape_.assign(dims.begin(), dims.end());
    }
  }
  // Every rank's shape, on every rank.
  std::vector<Shape> get_shapes() {
    std::vector<Shape> out;
    for (const auto& d : value_.all_dims({shape_.begin(), shape_.end()}))
      out.emplace_back(d.begin(), d.end());
    return out;
  }

 private:
  static std::size_t elems(const Shape& s) {
    std::size_t n = 1;
    for (std::size_t d : s) n *= d;
    return n;
  }
  void check_rank(const char* op, int rank) const {
    detail::check_rank_in_range("DeviceShared '" + name_ + "'", op, rank, comm_->size());
  }
  Communicator* comm_;
  std::string name_;
  detail::DeviceValue value_;
  Shape shape_;
};

// Copies rows of a host array (Data<T> in shared memory, typically) to device memory through two
// pinned host buffers (cudaHostAlloc), reused from batch to batch and grown to the largest batch:
// stage() gathers the rows into one buffer while the copy of the previous batch from the other
// may still be running. A stager belongs to one thread.
class DeviceStager {
 public:
  // device: where the rows go (an index among the visible devices); -1: the NCCL device of this
  // process when there is one, else the current CUDA device. Throws NotSupported without a
  // visible device or CUDA.
  explicit DeviceStager(int device = -1);
  ~DeviceStager();  // waits (with the deadline) for the copies still reading its buffers
  DeviceStager(const DeviceStager&) = delete;
  DeviceStager& operator=(const DeviceStager&) = delete;

  // Rows `sel` of a row-major array of `rows` rows of row_bytes bytes at `base`, packed one
  // after another at device address `dst` (sel.size() * row_bytes bytes). The copy is queued on
  // `stream` (a stream of the stager's device; nullptr: the stager's own) and may still run when
  // this returns: call wait(), or order later work after it on the same stream. InvalidArgument
  // for a row out of range. Returns the bytes queued.
  std::size_t stage(const void* base, std::size_t rows, std::size_t row_bytes,
                    const RowSelection& sel, void* dst, Stream stream = nullptr);
  // Blocks until every copy queued so far is done (SYNK_TIMEOUT).
  void wait();

  int device() const;
  Stream stream() const;             // the stager's own stream
  std::size_t pinned_bytes() const;  // bytes of pinned host memory held (both buffers)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// This rank's rows of `sel`, copied to `dst` (room for sel.size() * data.row_elems() elements,
// device memory) through the stager. Returns the number of rows. Does not wait for the copy.
template <class T>
std::size_t take_to_device(const Data<T>& data, const RowSelection& sel, T* dst,
                           DeviceStager& stager, Stream stream = nullptr) {
  stager.stage(data.data(), data.rows(), data.row_elems() * sizeof(T), sel, dst, stream);
  return sel.size();
}
// This rank's share of `batch` split over `size` ranks (as Data::take), into a DeviceBuffer that
// must be large enough (InvalidArgument naming both sizes otherwise).
template <class T>
std::size_t take_to_device(const Data<T>& data, const Batch& batch, int rank, int size,
                           DeviceBuffer& dst, DeviceStager& stager, Stream stream = nullptr) {
  const RowSelection sel = batch.for_rank(data.rows(), rank, size);
  const std::size_t need = sel.size() * data.row_elems() * sizeof(T);
  if (need > dst.bytes()) {
    throw Error(ErrorCode::InvalidArgument,
                "take_to_device: " + std::to_string(sel.size()) + " rows of " +
                    std::to_string(data.row_elems() * sizeof(T)) + " bytes need " +
                    std::to_string(need) + " bytes but the DeviceBuffer holds " +
                    std::to_string(dst.bytes()));
  }
  return take_to_device(data, sel, static_cast<T*>(dst.data()), stager, stream);
}

}  // namespace synk
