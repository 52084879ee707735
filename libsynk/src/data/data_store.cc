// DataStore: the node-shared memory behind Data<T>. Local rank 0 of each node creates the
// segment and every local rank maps it, as the shm backend's (backends/shm/segment_share.h);
// rank 0's values reach each node once, through the node leaders.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "backends/shm/segment_share.h"
#include "core/backend.h"
#include "core/logging.h"
#include "core/mpi_check.h"
#include "core/mpi_runtime.h"
#include "core/mpi_watchdog.h"
#include "synk/agreement.h"
#include "synk/data.h"
#include "synk/error.h"

namespace synk::detail {

struct DataStore::Impl {
  const CommContext* ctx = nullptr;
  // Shared with mapping()'s holders, so that a view taken before a resize or free() stays
  // readable (the old rows) instead of pointing at unmapped memory.
  std::shared_ptr<shm::Segment> segment = std::make_shared<shm::Segment>();
};

namespace {

std::size_t checked_product(const std::vector<std::size_t>& dims, std::size_t from) {
  std::size_t p = 1;
  for (std::size_t i = from; i < dims.size(); ++i) {
    if (dims[i] != 0 && p > SIZE_MAX / dims[i]) {
      throw Error(ErrorCode::InvalidArgument, "Data: the shape's size overflows");
    }
    p *= dims[i];
  }
  return p;
}

void check_oversize(double oversize) {
  if (!(oversize >= 1.0 && oversize <= 2.0)) {
    throw Error(ErrorCode::InvalidArgument,
                "Data: oversize " + std::to_string(oversize) + " is outside [1, 2]");
  }
}

// Every rank learns whether any rank failed, so nobody is left waiting. A rank that failed
// gives its own reason; the others name the first rank that failed, its node and its reason
// (each used to name its own node, and no reason: "the loader (node 0): failed on another
// rank" when node 1's loader had failed).
void agree(const CommContext& ctx, bool ok, const std::string& what, const std::string& error,
           const std::string& own_where = "") {
  const std::optional<RankFailure> first = first_failure(ctx.comm, !ok, error, ctx.node);
  if (!first) return;
  if (!ok) throw Error(ErrorCode::System, what + own_where + ": " + error);
  throw Error(ErrorCode::Remote, what + ": failed on rank " +
                                     ctx.rank_text(first->rank, first->node) + ": " + first->text);
}

// Collective: every rank passed what rank 0 passed (`mine` describes this rank's arguments).
// Otherwise an InvalidArgument on every rank naming the first rank that differs, and both: the
// ranks went on to make segments of different sizes ("not the one this job made" on one node;
// across nodes, a leader's broadcast waited for the others).
void check_same(const CommContext& c, const std::string& what, const std::string& mine) {
  const std::string zero = text_from(c.comm, 0, mine);
  const std::optional<RankFailure> odd = first_failure(c.comm, mine != zero, mine);
  if (!odd) return;
  throw Error(ErrorCode::InvalidArgument, what + ": every rank must pass the same; rank 0 passed " +
                                              zero + ", rank " + std::to_string(odd->rank) +
                                              " passed " + odd->text);
}

// The shortest text that reads back as the same double (1.1, not 1.1000000000000001).
std::string exact(double v) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  return std::string(buf, end);
}

std::string describe(const std::vector<std::size_t>& shape, std::size_t elem_size,
                     double oversize) {
  std::string text = "shape [";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "] of " + std::to_string(elem_size) + "-byte elements, oversize " + exact(oversize);
}

// A rank that did not write the rows maps them into its page tables now, at the cost of one
// call (12 ms for 188 MB here), rather than one fault per page in the training loop's first
// epoch: the first batches of a 188 MB Data were twice as slow to take without it
// (docs/measurements.md, "One collective per call"). Only the rows written: populating the
// unused capacity would allocate it. Best effort: before Linux 5.14 the call fails and the
// pages fault in.
void populate_rows(const unsigned char* data, std::size_t bytes) {
#ifdef MADV_POPULATE_READ
  if (!data || bytes == 0) return;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(data) + bytes;
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)data;
  (void)bytes;
#endif
}

// Rows for `rows` with room to grow by `oversize` (in [1, 2]); refused where that many rows
// do not fit in a size_t (the conversion from double would be undefined).
std::size_t capacity_for(std::size_t rows, double oversize) {
  const double want = std::ceil(static_cast<double>(rows) * oversize);
  if (!(want < 18446744073709551616.0)) {  // 2^64
    throw Error(ErrorCode::InvalidArgument,
                "Data: " + std::to_string(rows) + " rows with oversize " +
                    std::to_string(oversize) + " overflow the size");
  }
  return static_cast<std::size_t>(want);
}

}  // namespace

DataStore::DataStore(const Communicator& comm, std::vector<std::size_t> shape,
                     std::size_t elem_size, double oversize)
    : impl_(std::make_unique<Impl>()), shape_(std::move(shape)), elem_size_(elem_size) {
  impl_->ctx = &context_of(comm);
  // First, so that an argument bad on some ranks only is an error on all of them; watched, so
  // that a rank that never makes the Data ends the others' wait (the rest is work, not a wait).
  {
    const MpiWatch watch = watch_step("making a Data", impl_->ctx->comm);
    check_same(*impl_->ctx, "Data", describe(shape_, elem_size_, oversize));
  }
  if (shape_.empty()) throw Error(ErrorCode::InvalidArgument, "Data: the shape is empty");
  check_oversize(oversize);
  row_elems_ = checked_product(shape_, 1);
  checked_product(shape_, 0);
  allocate(capacity_for(shape_[0], oversize), nullptr, 0);
}

DataStore::~DataStore() = default;

const unsigned char* DataStore::bytes() const {
  return static_cast<const unsigned char*>(impl_->segment->data());
}
const std::string& DataStore::segment_name() const { return impl_->segment->name(); }

std::shared_ptr<const void> DataStore::mapping() const { return impl_->segment; }

unsigned char* DataStore::writable_bytes() { return static_cast<unsigned char*>(impl_->segment->data()); }

void DataStore::allocate(std::size_t capacity_rows, const unsigned char* keep, std::size_t keep_bytes) {
  const CommContext& c = *impl_->ctx;
  std::size_t elems = 0, raw = 0;
  if (__builtin_mul_overflow(capacity_rows, row_elems_, &elems) ||
      __builtin_mul_overflow(elems, elem_size_, &raw)) {
    // (checked_product covers rows * row_elems, not the element size or the oversize: 2^62
    // floats wrapped to a 1-byte segment)
    throw Error(ErrorCode::InvalidArgument,
                "Data: " + std::to_string(capacity_rows) + " rows of " + std::to_string(row_elems_) +
                    " elements of " + std::to_string(elem_size_) + " bytes overflow the size");
  }
  const std::size_t bytes = std::max<std::size_t>(raw, 1);
  shm::SharedSegment fresh = shm::try_share_segment(c.local_comm, bytes);
  // A rank that did its part but whose node failed hears it from agree (Remote).
  std::string error = fresh.error;
  if (!fresh.created && c.local_rank != 0) error = "on local rank 0: " + error;
  // The old rows, before agree: no rank reads the new segment before local rank 0 is past it.
  if (fresh.ok && c.local_rank == 0 && keep_bytes) {
    std::memcpy(fresh.segment.data(), keep, keep_bytes);
  }
  agree(c, fresh.ok || error.empty(), "Data: shared segment of " + std::to_string(bytes) + " bytes",
        error);
  impl_->segment = std::make_shared<shm::Segment>(std::move(fresh.segment));
  capacity_rows_ = capacity_rows;
  if (c.local_rank != 0) populate_rows(this->bytes(), keep_bytes);  // the rows a resize kept
  SYNK_LOG_AT(info, "Data: segment " << impl_->segment->name() << ", " << bytes << " bytes");
}

void DataStore::set_value(const void* values, std::size_t bytes) {
  const CommContext& c = *impl_->ctx;
  const std::size_t expected = shape_[0] * row_elems_ * elem_size_;
  std::uint64_t given = bytes;
  {
    // Watched up to where every rank has met: one that never calls set_value ends the others'
    // wait. The copy and the broadcast across nodes after it are work, which may take long.
    const MpiWatch watch = watch_step("Data::set_value", c.comm);
    SYNK_CHECK_MPI(MPI_Bcast(&given, 1, MPI_UINT64_T, 0, c.comm));
    if (given != expected) {
      throw Error(ErrorCode::InvalidArgument,
                  "Data::set_value: rank 0 passed " + std::to_string(given / elem_size_) +
                      " elements, the data holds " + std::to_string(expected / elem_size_));
    }
    // No rank of the node may still be reading the old rows (a view from take()) when they
    // are overwritten: each gets here only once it is done with them.
    SYNK_CHECK_MPI(MPI_Barrier(c.comm));
  }
  if (c.rank == 0 && expected) std::memcpy(writable_bytes(), values, expected);
  if (c.leader_comm != MPI_COMM_NULL && c.num_nodes > 1) {
    constexpr std::size_t kChunk = std::size_t{1} << 30;
    for (std::size_t off = 0; off < expected; off += kChunk) {
      SYNK_CHECK_MPI(MPI_Bcast(writable_bytes() + off, static_cast<int>(std::min(kChunk, expected - off)),
                               MPI_BYTE, 0, c.leader_comm));
    }
  }
  SYNK_CHECK_MPI(MPI_Barrier(c.local_comm));  // the node's copy is complete before anyone reads
  if (c.local_rank != 0) populate_rows(this->bytes(), expected);
}

void DataStore::load(const std::function<void(void*)>& loader) {
  const CommContext& c = *impl_->ctx;
  bool ok = true;
  std::string error;
  {
    // Watched, and across every node: a rank that never calls load ends the others' wait. Past
    // it they wait for the loader, which may take long. (Nobody reads the old rows now either.)
    const MpiWatch watch = watch_step("Data::load", c.comm);
    SYNK_CHECK_MPI(MPI_Barrier(c.comm));
  }
  if (c.local_rank == 0) {
    try {
      loader(writable_bytes());
    } catch (const std::exception& e) {
      ok = false;
      error = e.what();
    } catch (...) {
      ok = false;
      error = "an exception that is not a std::exception";
    }
  }
  agree(c, ok, "Data::load: the loader", error.empty() && !ok ? "(no message)" : error,
        " on rank " + c.rank_text(c.rank, c.node));
  if (c.local_rank != 0) populate_rows(bytes(), shape_[0] * row_elems_ * elem_size_);
}

void DataStore::resize(std::size_t rows, double oversize) {
  {
    const MpiWatch watch = watch_step("Data::resize", impl_->ctx->comm);  // as in set_value
    check_same(*impl_->ctx, "Data::resize",
               std::to_string(rows) + " rows, oversize " + exact(oversize));
  }
  check_oversize(oversize);
  if (rows <= capacity_rows_) {
    // Rows that come back within the capacity are zeros, as in a new segment (they showed the
    // rows from before a shrink): local rank 0 clears them while no rank of the node reads.
    if (rows > shape_[0]) {
      const CommContext& c = *impl_->ctx;
      const std::size_t row_bytes = row_elems_ * elem_size_;
      SYNK_CHECK_MPI(MPI_Barrier(c.local_comm));
      if (c.local_rank == 0) {
        std::memset(writable_bytes() + shape_[0] * row_bytes, 0, (rows - shape_[0]) * row_bytes);
      }
      SYNK_CHECK_MPI(MPI_Barrier(c.local_comm));
    }
    shape_[0] = rows;
    return;
  }
  const std::size_t keep = std::min(rows, shape_[0]) * row_elems_ * elem_size_;
  // The old segment stays until the new one is in place: a resize that fails (too large, no
  // memory) leaves the data as it was. (It was moved out first, and freed by the failure:
  // rows() still said the old count over a null data().)
  allocate(capacity_for(rows, oversize), bytes(), keep);
  shape_[0] = rows;
}

void DataStore::free() {
  impl_->segment = std::make_shared<shm::Segment>();
  shape_[0] = 0;
  capacity_rows_ = 0;
}

}  // namespace synk::detail
