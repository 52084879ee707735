// See mpi_backend.h. Conventions for in-place calls are NCCL's (see synk/communicator.h).
#include "backends/mpi/mpi_backend.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <utility>

#include "backends/mpi/mpi_settings.h"
#include "backends/mpi/mpi_types.h"
#include "core/backoff.h"
#include "core/byte_offset.h"
#include "core/env.h"
#include "core/mpi_check.h"
#include "core/mpi_tags.h"
#include "core/mpi_watchdog.h"

namespace synk::detail {

namespace {


bool is_16bit_float(DataType t) { return t == DataType::float16 || t == DataType::bfloat16; }

// MPI takes a message shorter than its receive silently: there, the ranks' counts (gatherv's
// recv_counts, scatterv's send_counts) disagree with what `from` sent.
void check_received(const MPI_Status& status, MPI_Datatype t, std::size_t due, const char* call,
                    int from) {
  int got = 0;
  SYNK_CHECK_MPI(MPI_Get_count(&status, t, &got));
  if (got >= 0 && static_cast<std::size_t>(got) == due) return;
  throw Error(ErrorCode::InvalidUsage,
              std::string(call) + ": rank " + std::to_string(from) + " sent " +
                  std::to_string(got) + " elements where this rank's counts say " +
                  std::to_string(due) + ": the ranks' counts disagree");
}

int as_int(std::size_t n) { return static_cast<int>(n); }  // callers chunk to <= INT_MAX first

// Requests still pending when a call fails are cancelled and completed before the error reaches
// the caller, so that no receive writes into (and no send reads from) a buffer it has freed. A
// send MPI cannot cancel (Open MPI's may not) completes only when its peer receives: after a
// second it is let go (freed, to complete on its own) rather than waited for without end.
void cancel_pending(std::vector<MPI_Request>& reqs) noexcept {
  const double give_up_at = MPI_Wtime() + 1.0;
  for (MPI_Request& r : reqs) {
    if (r == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&r);
    int done = 0;
    while (MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
           MPI_Wtime() < give_up_at) {
    }
    if (!done && r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }
}

// post() starts requests into reqs; then every one is waited for, its status in statuses. Where
// posting or the wait fails, what is still pending is cancelled first (cancel_pending).
template <class Post>
void post_and_wait_all(std::vector<MPI_Request>& reqs, std::vector<MPI_Status>& statuses,
                       Post&& post) {
  try {
    post();
    statuses.resize(reqs.size());
    SYNK_CHECK_MPI(MPI_Waitall(as_int(reqs.size()), reqs.data(), statuses.data()));
  } catch (...) {
    cancel_pending(reqs);
    throw;
  }
}

void widen(const void* src, DataType t, float* dst, std::size_t n) {
  if (t == DataType::float16) {
    const float16* s = static_cast<const float16*>(src);
    for (std::size_t i = 0; i < n; ++i) dst[i] = to_float(s[i]);
  } else {
    const bfloat16* s = static_cast<const bfloat16*>(src);
    for (std::size_t i = 0; i < n; ++i) dst[i] = to_float(s[i]);
  }
}

void narrow(const float* src, DataType t, void* dst, std::size_t n) {
  if (t == DataType::float16) {
    float16* d = static_cast<float16*>(dst);
    for (std::size_t i = 0; i < n; ++i) d[i] = to_float16(src[i]);
  } else {
    bfloat16* d = static_cast<bfloat16*>(dst);
    for (std::size_t i = 0; i < n; ++i) d[i] = to_bfloat16(src[i]);
  }
}

// Calls fn(offset, n) for consecutive chunks of at most `chunk` elements covering [0, count).
// Each chunk done before another is progress for the watchdog (its deadline bounds a chunk,
// not the call); the last one ends the call, which the watch sees anyway.
template <class Fn>
void for_chunks(std::size_t count, std::size_t chunk, Fn&& fn) {
  for (std::size_t off = 0; off < count; off += chunk) {
    const std::size_t n = std::min(chunk, count - off);
    fn(off, n);
    if (off + n < count) mpi_watch_progress();
  }
}

// A datatype of n contiguous elements whose extent is `stride_bytes`, so that block r of a
// gather lands r * stride_bytes from the buffer start. Freed by the destructor.
class StridedBlock {
 public:
  StridedBlock(MPI_Datatype base, std::size_t n, std::size_t stride_bytes) {
    MPI_Datatype contiguous;
    SYNK_CHECK_MPI(MPI_Type_contiguous(as_int(n), base, &contiguous));
    const int rc = MPI_Type_create_resized(contiguous, 0, static_cast<MPI_Aint>(stride_bytes), &type_);
    MPI_Type_free(&contiguous);
    if (rc != MPI_SUCCESS) throw_mpi_error(rc, "MPI_Type_create_resized");
    if (const int committed = MPI_Type_commit(&type_); committed != MPI_SUCCESS) {
      MPI_Type_free(&type_);  // the destructor will not run
      throw_mpi_error(committed, "MPI_Type_commit");
    }
  }
  ~StridedBlock() { MPI_Type_free(&type_); }
  StridedBlock(const StridedBlock&) = delete;
  StridedBlock& operator=(const StridedBlock&) = delete;
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

}  // namespace

void scale_avg(void* buf, std::size_t count, DataType t, int n) {
  if (t == DataType::float64) {
    const double inv = 1.0 / static_cast<double>(n);
    double* d = static_cast<double*>(buf);
    for (std::size_t i = 0; i < count; ++i) d[i] *= inv;
  } else {  // float32, or a float staging buffer of float16/bfloat16
    const float inv = 1.0f / static_cast<float>(n);
    float* f = static_cast<float*>(buf);
    for (std::size_t i = 0; i < count; ++i) f[i] *= inv;
  }
}

MpiBackend::MpiBackend(const CommContext& ctx) : ctx_(ctx) {
  max_chunk_ = mpi_settings().max_chunk_in_effect();
  stage_chunk_ = std::min<std::size_t>(max_chunk_, std::size_t{1} << 20);
}

float* MpiBackend::stage(std::vector<float>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Where the communicator's waits yield the core (CommOptions::yield_when_waiting: KeyValue's
// thread, beside the rank's computation on its core), a small call is the non-blocking one,
// tested between sleeps: in the blocking one Open MPI polls the core for as long as a late rank
// keeps it waiting. A large one stays blocking: Open MPI moves its data only while polled.
bool MpiBackend::yields(int n, MPI_Datatype t) const {
  if (!ctx_.yields_core) return false;
  int type_bytes = 0;
  MPI_Type_size(t, &type_bytes);
  return static_cast<long long>(n) * type_bytes <= kYieldingBytes;
}

void MpiBackend::wait_yielding(MPI_Request& req) {
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 0;; spins = std::min(spins + 1, 64)) {
    int done = 0;
    SYNK_CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (spins < 64) continue;
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited < std::chrono::microseconds(200)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep_pause(waited));
    }
  }
}

void MpiBackend::allreduce(const void* send, void* recv, int n, MPI_Datatype t, MPI_Op op) {
  if (!yields(n, t)) {
    SYNK_CHECK_MPI(MPI_Allreduce(send, recv, n, t, op, ctx_.comm));
    return;
  }
  MPI_Request req;
  SYNK_CHECK_MPI(MPI_Iallreduce(send, recv, n, t, op, ctx_.comm, &req));
  wait_yielding(req);
}

void MpiBackend::reduce(const void* send, void* recv, int n, MPI_Datatype t, MPI_Op op,
                        int root) {
  if (!yields(n, t)) {
    SYNK_CHECK_MPI(MPI_Reduce(send, recv, n, t, op, root, ctx_.comm));
    return;
  }
  MPI_Request req;
  SYNK_CHECK_MPI(MPI_Ireduce(send, recv, n, t, op, root, ctx_.comm, &req));
  wait_yielding(req);
}

void MpiBackend::bcast(void* buf, int n, MPI_Datatype t, int root) {
  if (!yields(n, t)) {
    SYNK_CHECK_MPI(MPI_Bcast(buf, n, t, root, ctx_.comm));
    return;
  }
  MPI_Request req;
  SYNK_CHECK_MPI(MPI_Ibcast(buf, n, t, root, ctx_.comm, &req));
  wait_yielding(req);
}

Request MpiBackend::all_reduce(const CollArgs& a) {
  const std::size_t es = size_of(a.dtype);
  if (is_16bit_float(a.dtype)) {
    for_chunks(a.count, stage_chunk_, [&](std::size_t off, std::size_t n) {
      float* buf = stage(stage_in_, n);
      widen(at(a.send, off * es), a.dtype, buf, n);
      allreduce(MPI_IN_PLACE, buf, as_int(n), MPI_FLOAT, mpi_reduce_op(a.op));
      if (a.op == ReduceOp::avg) scale_avg(buf, n, DataType::float32, ctx_.size);
      narrow(buf, a.dtype, at(a.recv, off * es), n);
    });
    return {};
  }
  const bool in_place = a.send == a.recv;
  for_chunks(a.count, max_chunk_, [&](std::size_t off, std::size_t n) {
    allreduce(in_place ? MPI_IN_PLACE : at(a.send, off * es), at(a.recv, off * es), as_int(n),
              mpi_datatype(a.dtype), mpi_reduce_op(a.op));
  });
  if (a.op == ReduceOp::avg) scale_avg(a.recv, a.count, a.dtype, ctx_.size);
  return {};
}

Request MpiBackend::reduce(const CollArgs& a) {
  const std::size_t es = size_of(a.dtype);
  const bool root = ctx_.rank == a.root;
  if (is_16bit_float(a.dtype)) {
    for_chunks(a.count, stage_chunk_, [&](std::size_t off, std::size_t n) {
      float* buf = stage(stage_in_, n);
      widen(at(a.send, off * es), a.dtype, buf, n);
      reduce(root ? MPI_IN_PLACE : buf, root ? buf : nullptr, as_int(n), MPI_FLOAT,
             mpi_reduce_op(a.op), a.root);
      if (root) {
        if (a.op == ReduceOp::avg) scale_avg(buf, n, DataType::float32, ctx_.size);
        narrow(buf, a.dtype, at(a.recv, off * es), n);
      }
    });
    return {};
  }
  const bool in_place = root && a.send == a.recv;
  for_chunks(a.count, max_chunk_, [&](std::size_t off, std::size_t n) {
    reduce(in_place ? MPI_IN_PLACE : at(a.send, off * es), root ? at(a.recv, off * es) : nullptr,
           as_int(n), mpi_datatype(a.dtype), mpi_reduce_op(a.op), a.root);
  });
  if (root && a.op == ReduceOp::avg) scale_avg(a.recv, a.count, a.dtype, ctx_.size);
  return {};
}

Request MpiBackend::broadcast(const CollArgs& a) {
  const std::size_t es = size_of(a.dtype);
  for_chunks(a.count, max_chunk_, [&](std::size_t off, std::size_t n) {
    bcast(at(a.recv, off * es), as_int(n), mpi_datatype(a.dtype), a.root);
  });
  return {};
}

Request MpiBackend::all_gather(const CollArgs& a) {
  if (a.count > max_chunk_) {
    gather_like_chunked(a);
    return {};
  }
  const std::size_t es = size_of(a.dtype);
  const bool in_place = a.send == at(a.recv, static_cast<std::size_t>(ctx_.rank) * a.count * es);
  const MPI_Datatype t = mpi_datatype(a.dtype);
  SYNK_CHECK_MPI(MPI_Allgather(in_place ? MPI_IN_PLACE : a.send, as_int(a.count), t, a.recv,
                               as_int(a.count), t, ctx_.comm));
  return {};
}

Request MpiBackend::gather(const CollArgs& a) {
  if (a.count > max_chunk_) {
    gather_like_chunked(a);
    return {};
  }
  const std::size_t es = size_of(a.dtype);
  const bool root = ctx_.rank == a.root;
  const bool in_place =
      root && a.send == at(a.recv, static_cast<std::size_t>(a.root) * a.count * es);
  const MPI_Datatype t = mpi_datatype(a.dtype);
  SYNK_CHECK_MPI(MPI_Gather(in_place ? MPI_IN_PLACE : a.send, as_int(a.count), t,
                            root ? a.recv : nullptr, as_int(a.count), t, a.root, ctx_.comm));
  return {};
}

Request MpiBackend::scatter(const CollArgs& a) {
  if (a.count > max_chunk_) {
    gather_like_chunked(a);
    return {};
  }
  const std::size_t es = size_of(a.dtype);
  const bool root = ctx_.rank == a.root;
  const bool in_place =
      root && a.recv == at(a.send, static_cast<std::size_t>(a.root) * a.count * es);
  const MPI_Datatype t = mpi_datatype(a.dtype);
  SYNK_CHECK_MPI(MPI_Scatter(root ? a.send : nullptr, as_int(a.count), t,
                             in_place ? MPI_IN_PLACE : a.recv, as_int(a.count), t, a.root,
                             ctx_.comm));
  return {};
}

// Chunk j of every rank's block travels in one call; a strided block type places it at
// rank * count within the gathered buffer.
void MpiBackend::gather_like_chunked(const CollArgs& a) {
  const std::size_t es = size_of(a.dtype);
  const MPI_Datatype t = mpi_datatype(a.dtype);
  const bool root = ctx_.rank == a.root;
  const std::size_t my_block = static_cast<std::size_t>(ctx_.rank) * a.count * es;
  const std::size_t root_block = static_cast<std::size_t>(a.root) * a.count * es;
  for_chunks(a.count, max_chunk_, [&](std::size_t off, std::size_t n) {
    StridedBlock block(t, n, a.count * es);
    const std::size_t b = off * es;
    switch (a.coll) {
      case Collective::all_gather: {
        const bool in_place = a.send == at(a.recv, my_block);
        SYNK_CHECK_MPI(MPI_Allgather(in_place ? MPI_IN_PLACE : at(a.send, b), as_int(n), t,
                                     at(a.recv, b), 1, block.get(), ctx_.comm));
        break;
      }
      case Collective::gather: {
        const bool in_place = root && a.send == at(a.recv, root_block);
        SYNK_CHECK_MPI(MPI_Gather(in_place ? MPI_IN_PLACE : at(a.send, b), as_int(n), t,
                                  root ? at(a.recv, b) : nullptr, 1, block.get(), a.root, ctx_.comm));
        break;
      }
      case Collective::scatter: {
        const bool in_place = root && a.recv == at(a.send, root_block);
        SYNK_CHECK_MPI(MPI_Scatter(root ? at(a.send, b) : nullptr, 1, block.get(),
                                   in_place ? MPI_IN_PLACE : at(a.recv, b), as_int(n), t, a.root,
                                   ctx_.comm));
        break;
      }
      default:
        break;
    }
  });
}

// gatherv and scatterv go point to point, so that counts and displacements of any size work.
// Off the root, `move` (MPI_Send or MPI_Recv) moves this rank's block in chunks. At the root,
// `start` (MPI_Irecv or MPI_Isend) starts one message per chunk of every other rank's block, at
// its displacement in the root's buffer, and `own` copies the root's own block (displacement,
// count); then it waits for them all, checking what came where the root receives
// (`receiving_root` names the call; null where it sends).
template <class Move, class Start, class Own>
void MpiBackend::by_blocks(const CollArgs& a, Move&& move, Start&& start, Own&& own,
                           const char* receiving_root) {
  if (ctx_.rank != a.root) {
    for_chunks(a.count, max_chunk_, [&](std::size_t off, std::size_t n) { move(off, n); });
    return;
  }
  std::vector<MPI_Request> reqs;
  std::vector<std::pair<int, std::size_t>> from_and_due;  // per request
  std::vector<MPI_Status> statuses;
  post_and_wait_all(reqs, statuses, [&] {
    std::size_t displ = 0;
    for (int r = 0; r < ctx_.size; ++r) {
      const std::size_t c = a.counts[static_cast<std::size_t>(r)];
      if (r == ctx_.rank) {
        if (c > 0) own(displ, c);
      } else {
        for_chunks(c, max_chunk_, [&](std::size_t off, std::size_t n) {
          reqs.push_back(MPI_REQUEST_NULL);
          from_and_due.emplace_back(r, n);
          start(r, displ + off, n, &reqs.back());
        });
      }
      displ += c;
    }
  });
  if (receiving_root == nullptr) return;
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    check_received(statuses[i], mpi_datatype(a.dtype), from_and_due[i].second, receiving_root,
                   from_and_due[i].first);
  }
}

// The root receives every rank's chunks straight into place, the others send theirs.
Request MpiBackend::gatherv(const CollArgs& a) {
  const std::size_t es = size_of(a.dtype);
  const MPI_Datatype t = mpi_datatype(a.dtype);
  by_blocks(
      a,
      [&](std::size_t off, std::size_t n) {
        SYNK_CHECK_MPI(MPI_Send(at(a.send, off * es), as_int(n), t, a.root, kGathervTag, ctx_.comm));
      },
      [&](int r, std::size_t at_elem, std::size_t n, MPI_Request* req) {
        SYNK_CHECK_MPI(MPI_Irecv(at(a.recv, at_elem * es), as_int(n), t, r, kGathervTag, ctx_.comm, req));
      },
      [&](std::size_t displ, std::size_t c) {
        if (a.send != at(a.recv, displ * es)) std::memcpy(at(a.recv, displ * es), a.send, c * es);
      },
      "gatherv");
  return {};
}

// gatherv's mirror: the root sends every rank's chunks straight from place, the others receive.
Request MpiBackend::scatterv(const CollArgs& a) {
  const std::size_t es = size_of(a.dtype);
  const MPI_Datatype t = mpi_datatype(a.dtype);
  by_blocks(
      a,
      [&](std::size_t off, std::size_t n) {
        MPI_Status status;
        SYNK_CHECK_MPI(MPI_Recv(at(a.recv, off * es), as_int(n), t, a.root, kScattervTag,
                                ctx_.comm, &status));
        check_received(status, t, n, "scatterv", a.root);
      },
      [&](int r, std::size_t at_elem, std::size_t n, MPI_Request* req) {
        SYNK_CHECK_MPI(MPI_Isend(at(a.send, at_elem * es), as_int(n), t, r, kScattervTag, ctx_.comm, req));
      },
      [&](std::size_t displ, std::size_t c) {
        if (a.recv != at(a.send, displ * es)) std::memcpy(a.recv, at(a.send, displ * es), c * es);
      },
      nullptr);
  return {};
}

Request MpiBackend::reduce_scatter(const CollArgs& a) {
  const std::size_t es = size_of(a.dtype);
  const bool half = is_16bit_float(a.dtype);
  const bool in_place = a.recv == at(a.send, static_cast<std::size_t>(ctx_.rank) * a.count * es);
  // In place is each rank's own choice, so both paths must make the same MPI calls: one call
  // of a.count elements, which the staged path makes only up to stage_chunk_ (and not at all
  // for a count of 0).
  if (a.count == 0) return {};
  if (!half && !in_place && a.count <= stage_chunk_) {
    SYNK_CHECK_MPI(MPI_Reduce_scatter_block(a.send, a.recv, as_int(a.count), mpi_datatype(a.dtype),
                                            mpi_reduce_op(a.op), ctx_.comm));
    if (a.op == ReduceOp::avg) scale_avg(a.recv, a.count, a.dtype, ctx_.size);
    return {};
  }
  // Staged: chunk j of every block is packed (and widened to float for 16-bit types) into one
  // buffer, reduce-scattered, then written to recv. Reads of chunk j precede its write, so the
  // in-place layout is safe.
  const std::size_t n_ranks = static_cast<std::size_t>(ctx_.size);
  const std::size_t ses = half ? sizeof(float) : es;  // staged element size
  const MPI_Datatype st = half ? MPI_FLOAT : mpi_datatype(a.dtype);
  for_chunks(a.count, stage_chunk_, [&](std::size_t off, std::size_t n) {
    if (pack_.size() < n_ranks * n * ses + n * ses) pack_.resize(n_ranks * n * ses + n * ses);
    unsigned char* packed = pack_.data();
    unsigned char* out = packed + n_ranks * n * ses;
    for (std::size_t r = 0; r < n_ranks; ++r) {
      const void* src = at(a.send, (r * a.count + off) * es);
      if (half) {
        widen(src, a.dtype, reinterpret_cast<float*>(packed + r * n * ses), n);
      } else {
        std::memcpy(packed + r * n * ses, src, n * es);
      }
    }
    SYNK_CHECK_MPI(MPI_Reduce_scatter_block(packed, out, as_int(n), st, mpi_reduce_op(a.op), ctx_.comm));
    if (a.op == ReduceOp::avg) scale_avg(out, n, half ? DataType::float32 : a.dtype, ctx_.size);
    if (half) {
      narrow(reinterpret_cast<const float*>(out), a.dtype, at(a.recv, off * es), n);
    } else {
      std::memcpy(at(a.recv, off * es), out, n * es);
    }
  });
  return {};
}

// Above the MPI int limit per pair, chunk j of every block travels in one MPI_Alltoall, a
// strided block type placing it at rank * count on both sides.
Request MpiBackend::all_to_all(const CollArgs& a) {
  const MPI_Datatype t = mpi_datatype(a.dtype);
  if (a.count <= max_chunk_) {
    SYNK_CHECK_MPI(MPI_Alltoall(a.send, as_int(a.count), t, a.recv, as_int(a.count), t, ctx_.comm));
    return {};
  }
  const std::size_t es = size_of(a.dtype);
  for_chunks(a.count, max_chunk_, [&](std::size_t off, std::size_t n) {
    StridedBlock block(t, n, a.count * es);
    SYNK_CHECK_MPI(MPI_Alltoall(at(a.send, off * es), 1, block.get(), at(a.recv, off * es), 1,
                                block.get(), ctx_.comm));
  });
  return {};
}

// A receive and a send per pair (one message at least), in chunks of at most max_chunk_
// elements, all posted, then waited for, each receive checked against what arrived (where counts
// disagree, MPI takes a shorter message silently); a rank's own block is a copy. Counts and
// displacements of any size work, which MPI_Alltoallv's ints do not.
Request MpiBackend::all_to_allv(const CollArgs& a) {
  const std::size_t es = size_of(a.dtype);
  const MPI_Datatype t = mpi_datatype(a.dtype);
  std::vector<MPI_Request> reqs;
  std::vector<std::pair<int, std::size_t>> from_and_due;  // per receive, first in reqs
  std::vector<MPI_Status> statuses;
  post_and_wait_all(reqs, statuses, [&] {
    for (int pass = 0; pass < 2; ++pass) {  // the receives, then the sends
      const bool receive = pass == 0;
      std::size_t displ = 0;
      for (int q = 0; q < ctx_.size; ++q) {
        const std::size_t c = (receive ? a.recv_counts : a.counts)[static_cast<std::size_t>(q)];
        const auto post = [&](std::size_t off, std::size_t n) {
          reqs.push_back(MPI_REQUEST_NULL);
          if (receive) {
            from_and_due.emplace_back(q, n);
            SYNK_CHECK_MPI(MPI_Irecv(at(a.recv, (displ + off) * es), as_int(n), t, q,
                                     kAllToAllvTag, ctx_.comm, &reqs.back()));
          } else {
            SYNK_CHECK_MPI(MPI_Isend(at(a.send, (displ + off) * es), as_int(n), t, q,
                                     kAllToAllvTag, ctx_.comm, &reqs.back()));
          }
        };
        // An empty block is an empty message: against a peer's count it fails the receive,
        // where skipping it left the peer's message for a later call.
        if (q != ctx_.rank && c == 0) post(0, 0);
        if (q != ctx_.rank) for_chunks(c, max_chunk_, post);
        displ += c;
      }
    }
  });
  for (std::size_t i = 0; i < from_and_due.size(); ++i) {
    check_received(statuses[i], t, from_and_due[i].second, "all_to_allv", from_and_due[i].first);
  }
  // This rank's block to itself (its two counts agree: validation checked them).
  const auto me = static_cast<std::ptrdiff_t>(ctx_.rank);
  const std::size_t send_displ = std::accumulate(a.counts.begin(), a.counts.begin() + me,
                                                 std::size_t{0});
  const std::size_t recv_displ = std::accumulate(a.recv_counts.begin(),
                                                 a.recv_counts.begin() + me, std::size_t{0});
  if (const std::size_t own = a.counts[static_cast<std::size_t>(me)]; own > 0) {
    std::memcpy(at(a.recv, recv_displ * es), at(a.send, send_displ * es), own * es);
  }
  return {};
}

Request MpiBackend::barrier() {
  SYNK_CHECK_MPI(MPI_Barrier(ctx_.comm));
  return {};
}

}  // namespace synk::detail
