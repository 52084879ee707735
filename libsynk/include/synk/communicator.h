// synk::Communicator: a group of ranks and the collectives they run together.
// Built on MPI: it starts MPI when the program has not, or adopts the caller's MPI_Comm.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "synk/error.h"
#include "synk/node_buffer.h"
#include "synk/request.h"
#include "synk/types.h"

struct CUstream_st;  // CUDA's stream object (cudaStream_t is CUstream_st*); no CUDA header here

namespace synk {

class Communicator;
namespace detail {
struct CommState;
struct CommContext;
// libsynk's own parts (Data, ...) reach the rank layout through this.
const CommContext& context_of(const Communicator& comm);
// KeyValue's own communicator: a duplicate of comm on comm's backend (a host one for nccl),
// whose waiting ranks yield their core at once. Collective over comm.
Communicator duplicate_for_engine(const Communicator& comm);
// Whether comm's calls may run on a thread of their own beside the caller's calls (they make
// no MPI call: shm without SYNK_CHECK_CALLS).
bool runs_in_background(const Communicator& comm);
// Whether comm sends calls on device memory to NCCL (SYNK_BACKEND=auto in a build with NCCL).
bool routes_by_memory(const Communicator& comm);
// Master-driven mode (synk/distribute.h): while `since` is set ("serve()", "distribute()"), the
// master's own collectives on comm are InvalidUsage, since the workers serve its requests and
// would never join them; nullptr (inside a request, after close()) lets them run again. On one
// rank, with no workers, it refuses nothing.
void set_master_alone(Communicator& comm, const char* since);
}  // namespace detail

struct CommOptions {
  // "auto", "mpi", "shm" or "nccl"; empty means the SYNK_BACKEND variable (default auto).
  std::string backend;
  // A rank that waits in a call for the others yields its core at once, instead of polling
  // first (SYNK_SHM_SPIN_US), and sleeps in a long wait: for calls made on a thread beside
  // computation on the same core (KeyValue's). On mpi, all_reduce, reduce and broadcast then
  // wait in MPI's non-blocking calls, tested between sleeps, not in Open MPI's polling ones.
  bool yield_when_waiting = false;
};

// Buffer conventions (those of NCCL):
//  - Every call is collective: every rank of the communicator makes it, in the same order,
//    with the same count (gatherv and scatterv: its own, as the root's counts say; all_to_allv:
//    its own counts, which its peers' agree with), dtype, op and root.
//  - In place means send == recv for all_reduce, reduce and broadcast; for all_gather and
//    gather, send == recv + rank * count elements; for scatter (at the root),
//    recv == send + root * count; for gatherv and scatterv (at the root), the root's block is
//    where the counts before it place it; for reduce_scatter, recv == send + rank * recv_count.
//    all_to_all(v) has no in place. Any other overlap of send and recv is an InvalidUsage error.
//  - Counts are elements, not bytes, and may exceed 2^31.
//  - A buffer that a rank does not use (recv of reduce/gather off the root, send of scatter
//    and scatterv off the root) may be null there.
class Communicator {
 public:
  // All ranks of MPI_COMM_WORLD. Initializes MPI if the program has not (and then finalizes
  // it at exit). Collective over MPI_COMM_WORLD.
  Communicator();
  // Adopts an existing communicator (any MPI_Comm, including a split one). synk works on its
  // own duplicate, so its traffic never mixes with the caller's. Collective over comm.
  explicit Communicator(MPI_Comm comm, const CommOptions& options = {});
  explicit Communicator(const CommOptions& options);
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  int local_rank() const;  // rank among the ranks of this node
  int local_size() const;
  int node() const;  // index of this node, 0..num_nodes()-1, in order of the nodes' first ranks
  int num_nodes() const;
  const std::string& backend() const;  // the backend in use: "mpi", "shm", ...
  MPI_Comm mpi_comm() const;           // synk's duplicate of the communicator
  // The CUDA device (an index among this rank's visible devices) that the nccl backend's
  // collectives run on, where their buffers must be (DeviceBuffer(bytes, comm.device())); -1 on
  // the host backends.
  int device() const;

  // Ranks with the same color form a new communicator, ordered by key then rank (MPI_Comm_split).
  Communicator split(int color, int key) const;

  // The nccl backend queues this communicator's collectives on `stream` (a cudaStream_t), after
  // the caller's earlier work on it, instead of on synk's own stream; nullptr goes back to
  // synk's own. Calls still return once their work is done (SYNK_TIMEOUT bounds the wait).
  // Host backends have no stream and ignore it. A split communicator starts on synk's own.
  void set_stream(::CUstream_st* stream);
  ::CUstream_st* stream() const;

  // `bytes` of memory for this rank that the other ranks of the node can read in place
  // (synk/node_buffer.h): all_gather and large all_reduces (and reduces on 3+ ranks) skip a copy on
  // the shm backend for every rank whose send buffer lies in such memory. Collective: every rank
  // calls it, with the same bytes. The part starts a page; 0 bytes gives an empty buffer.
  NodeBuffer alloc(std::size_t bytes);

  void all_reduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op);
  void reduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
              int root);
  void broadcast(void* buf, std::size_t count, DataType dtype, int root);
  // recv holds size() * count elements, rank r's at offset r * count.
  void all_gather(const void* send, void* recv, std::size_t count, DataType dtype);
  void gather(const void* send, void* recv, std::size_t count, DataType dtype, int root);
  // Rank r sends send_count elements; at the root recv_counts[r] says how many come from rank r
  // (recv_counts is read at the root only) and they land one after another in rank order.
  void gatherv(const void* send, std::size_t send_count, void* recv,
               std::span<const std::size_t> recv_counts, DataType dtype, int root);
  // The root's send holds size() * count elements; rank r receives those at offset r * count.
  void scatter(const void* send, void* recv, std::size_t count, DataType dtype, int root);
  // Rank r receives recv_count elements; at the root send_counts[r] says how many go to rank r
  // (send_counts is read at the root only), taken one after another in rank order from send.
  void scatterv(const void* send, std::span<const std::size_t> send_counts, void* recv,
                std::size_t recv_count, DataType dtype, int root);
  // send holds size() * recv_count elements; rank r receives the reduction of block r.
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DataType dtype,
                      ReduceOp op);
  // send and recv hold size() * count elements each: block r of send (at offset r * count) goes
  // to rank r, and block r of recv comes from rank r (MPI_Alltoall; Horovod's alltoall with equal
  // splits). send and recv must not overlap.
  void all_to_all(const void* send, void* recv, std::size_t count, DataType dtype);
  // Rank r sends send_counts[q] elements to rank q, taken one after another in rank order from
  // send, and receives recv_counts[q] from rank q, placed one after another in rank order in
  // recv (MPI_Alltoallv without displacements; Horovod's alltoall with splits). recv_counts[q]
  // must be rank q's send_counts[r]. send and recv must not overlap.
  void all_to_allv(const void* send, std::span<const std::size_t> send_counts, void* recv,
                   std::span<const std::size_t> recv_counts, DataType dtype);
  void barrier();

  // Non-blocking collectives: the same calls, arguments and conventions, started and returned
  // at once as a Request that completes when the call has ended (wait() and test() rethrow its
  // error). Every call, blocking or not (and alloc), runs in the order this rank issued it, as
  // MPI's non-blocking collectives do. The buffers, and gatherv's recv_counts, are synk's until
  // the Request completes; a Request destroyed before then waits for it. The calls run on a
  // progress thread of this communicator's, asleep while nothing is queued; but where a call
  // makes MPI calls of its own (the mpi and hier backends, SYNK_CHECK_CALLS) and MPI was
  // initialized below MPI_THREAD_MULTIPLE, it runs before it returns (its Request complete). On
  // nccl a call returns once it is queued on the stream, and wait() synchronizes. Issuing from
  // one thread while another waits is safe; two threads issuing at once on one communicator
  // have no order, as in MPI.
  Request iall_reduce(const void* send, void* recv, std::size_t count, DataType dtype,
                      ReduceOp op);
  Request ireduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                  int root);
  Request ibroadcast(void* buf, std::size_t count, DataType dtype, int root);
  Request iall_gather(const void* send, void* recv, std::size_t count, DataType dtype);
  Request igather(const void* send, void* recv, std::size_t count, DataType dtype, int root);
  Request igatherv(const void* send, std::size_t send_count, void* recv,
                   std::span<const std::size_t> recv_counts, DataType dtype, int root);
  Request iscatter(const void* send, void* recv, std::size_t count, DataType dtype, int root);
  Request iscatterv(const void* send, std::span<const std::size_t> send_counts, void* recv,
                    std::size_t recv_count, DataType dtype, int root);
  Request ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DataType dtype,
                          ReduceOp op);
  Request iall_to_all(const void* send, void* recv, std::size_t count, DataType dtype);
  Request iall_to_allv(const void* send, std::span<const std::size_t> send_counts, void* recv,
                       std::span<const std::size_t> recv_counts, DataType dtype);
  Request ibarrier();

  // Typed non-blocking conveniences, on the caller's buffers.
  template <class T>
  Request iall_reduce(std::span<T> buf, ReduceOp op = ReduceOp::sum) {
    return iall_reduce(buf.data(), buf.data(), buf.size(), data_type_of<T>(), op);
  }
  template <class T>
  Request iall_reduce(std::span<const T> send, std::span<T> recv, ReduceOp op = ReduceOp::sum) {
    check_same_size("all_reduce", send.size(), recv.size(), data_type_of<T>(), send.data(),
                    recv.data());
    return iall_reduce(send.data(), recv.data(), send.size(), data_type_of<T>(), op);
  }
  template <class T>
  Request iall_reduce(std::vector<T>& buf, ReduceOp op = ReduceOp::sum) {
    return iall_reduce(std::span<T>(buf), op);
  }
  template <class T>
  Request ireduce(std::span<T> buf, int root, ReduceOp op = ReduceOp::sum) {
    return ireduce(buf.data(), buf.data(), buf.size(), data_type_of<T>(), op, root);
  }
  template <class T>
  Request ibroadcast(std::span<T> buf, int root) {
    return ibroadcast(buf.data(), buf.size(), data_type_of<T>(), root);
  }
  template <class T>
  Request ibroadcast(std::vector<T>& buf, int root) {
    return ibroadcast(std::span<T>(buf), root);
  }
  // recv holds size() * send.size() elements.
  template <class T>
  Request iall_gather(std::span<const T> send, std::span<T> recv) {
    check_blocks("all_gather", send.size(), recv.size(), data_type_of<T>(), send.data(),
                 recv.data());
    return iall_gather(send.data(), recv.data(), send.size(), data_type_of<T>());
  }
  // At the root recv holds size() * send.size() elements; elsewhere it may be empty.
  template <class T>
  Request igather(std::span<const T> send, std::span<T> recv, int root) {
    if (rank() == root) {
      check_blocks("gather", send.size(), recv.size(), data_type_of<T>(), send.data(),
                   recv.data(), root);
    }
    return igather(send.data(), recv.data(), send.size(), data_type_of<T>(), root);
  }
  // send holds size() * recv.size() elements (at the root; elsewhere it may be empty).
  template <class T>
  Request iscatter(std::span<const T> send, std::span<T> recv, int root) {
    if (rank() == root) {
      check_blocks("scatter", recv.size(), send.size(), data_type_of<T>(), send.data(),
                   recv.data(), root);
    }
    return iscatter(send.data(), recv.data(), recv.size(), data_type_of<T>(), root);
  }
  // send holds size() * recv.size() elements.
  template <class T>
  Request ireduce_scatter(std::span<const T> send, std::span<T> recv,
                          ReduceOp op = ReduceOp::sum) {
    check_blocks("reduce_scatter", recv.size(), send.size(), data_type_of<T>(), send.data(),
                 recv.data());
    return ireduce_scatter(send.data(), recv.data(), recv.size(), data_type_of<T>(), op);
  }
  // send and recv hold size() blocks of the same size.
  template <class T>
  Request iall_to_all(std::span<const T> send, std::span<T> recv) {
    check_same_size("all_to_all", send.size(), recv.size(), data_type_of<T>(), send.data(),
                    recv.data());
    const std::size_t n = static_cast<std::size_t>(size());
    check_blocks("all_to_all", send.size() / n, send.size(), data_type_of<T>(), send.data(),
                 recv.data());
    return iall_to_all(send.data(), recv.data(), send.size() / n, data_type_of<T>());
  }

  // Typed conveniences: the DataType comes from the element type.
  template <class T>
  void all_reduce(std::span<T> buf, ReduceOp op = ReduceOp::sum) {
    all_reduce(buf.data(), buf.data(), buf.size(), data_type_of<T>(), op);
  }
  template <class T>
  void all_reduce(std::span<const T> send, std::span<T> recv, ReduceOp op = ReduceOp::sum) {
    check_same_size("all_reduce", send.size(), recv.size(), data_type_of<T>(), send.data(),
                    recv.data());
    all_reduce(send.data(), recv.data(), send.size(), data_type_of<T>(), op);
  }
  template <class T>
  void all_reduce(std::vector<T>& buf, ReduceOp op = ReduceOp::sum) {
    all_reduce(std::span<T>(buf), op);
  }
  template <class T>
  void broadcast(std::span<T> buf, int root) {
    broadcast(buf.data(), buf.size(), data_type_of<T>(), root);
  }
  template <class T>
  void broadcast(std::vector<T>& buf, int root) {
    broadcast(std::span<T>(buf), root);
  }
  template <class T>
  void all_reduce(const std::vector<T>& send, std::vector<T>& recv, ReduceOp op = ReduceOp::sum) {
    all_reduce(std::span<const T>(send), std::span<T>(recv), op);
  }
  // In place: the reduction lands in buf at the root (the others' buf is left as it was).
  template <class T>
  void reduce(std::span<T> buf, int root, ReduceOp op = ReduceOp::sum) {
    reduce(buf.data(), buf.data(), buf.size(), data_type_of<T>(), op, root);
  }
  template <class T>
  void reduce(std::vector<T>& buf, int root, ReduceOp op = ReduceOp::sum) {
    reduce(std::span<T>(buf), root, op);
  }
  // Every rank's send, in rank order, on every rank.
  template <class T>
  std::vector<T> all_gather(std::span<const T> send) {
    std::vector<T> out(send.size() * static_cast<std::size_t>(size()));
    all_gather(send.data(), out.data(), send.size(), data_type_of<T>());
    return out;
  }
  template <class T>
  std::vector<T> all_gather(std::span<T> send) {
    return all_gather(std::span<const T>(send));
  }
  template <class T>
  std::vector<T> all_gather(const std::vector<T>& send) {
    return all_gather(std::span<const T>(send));
  }
  // Every rank's send, in rank order, at the root; empty on the others.
  template <class T>
  std::vector<T> gather(std::span<const T> send, int root) {
    std::vector<T> out(rank() == root ? send.size() * static_cast<std::size_t>(size()) : 0);
    gather(send.data(), out.data(), send.size(), data_type_of<T>(), root);
    return out;
  }
  template <class T>
  std::vector<T> gather(const std::vector<T>& send, int root) {
    return gather(std::span<const T>(send), root);
  }
  // Block rank() of the reduction of every rank's send (size() blocks of equal size).
  template <class T>
  std::vector<T> reduce_scatter(std::span<const T> send, ReduceOp op = ReduceOp::sum) {
    const std::size_t n = static_cast<std::size_t>(size());
    if (send.size() % n != 0) {
      reject_typed("reduce_scatter", send.size() / n, data_type_of<T>(),
                   "send has " + std::to_string(send.size()) + " elements, not a multiple of the " +
                       std::to_string(n) + " ranks",
                   0, send.data());
    }
    std::vector<T> out(send.size() / n);
    reduce_scatter(send.data(), out.data(), out.size(), data_type_of<T>(), op);
    return out;
  }
  template <class T>
  std::vector<T> reduce_scatter(const std::vector<T>& send, ReduceOp op = ReduceOp::sum) {
    return reduce_scatter(std::span<const T>(send), op);
  }
  // Block r of every rank's send, in rank order (size() blocks of equal size): rank r's part of
  // an all_to_all.
  template <class T>
  std::vector<T> all_to_all(std::span<const T> send) {
    const std::size_t n = static_cast<std::size_t>(size());
    check_blocks("all_to_all", send.size() / n, send.size(), data_type_of<T>(), send.data(),
                 nullptr);
    std::vector<T> out(send.size());
    all_to_all(send.data(), out.data(), send.size() / n, data_type_of<T>());
    return out;
  }
  template <class T>
  std::vector<T> all_to_all(const std::vector<T>& send) {
    return all_to_all(std::span<const T>(send));
  }

 private:
  friend const detail::CommContext& detail::context_of(const Communicator& comm);
  friend bool detail::runs_in_background(const Communicator& comm);
  friend bool detail::routes_by_memory(const Communicator& comm);
  friend void detail::set_master_alone(Communicator& comm, const char* since);
  friend Communicator detail::duplicate_for_engine(const Communicator& comm);
  // Fails the call `op` of count elements of dtype on this rank because of `why`, taking part in
  // it as a rejected argument does (so the other ranks fail too where the backend can tell
  // them: shm, hier, SYNK_CHECK_CALLS=1). The call's buffers route it as the others' calls
  // are routed (device memory to NCCL on an auto communicator). Always throws.
  [[noreturn]] void reject_typed(const char* op, std::size_t count, DataType dtype,
                                 const std::string& why, int root = 0,
                                 const void* send = nullptr, void* recv = nullptr);
  void check_same_size(const char* op, std::size_t send, std::size_t recv, DataType dtype,
                       const void* send_data, void* recv_data);
  // `whole` must be size() blocks of `block` elements (all_gather's recv, scatter's send...).
  void check_blocks(const char* op, std::size_t block, std::size_t whole, DataType dtype,
                    const void* send_data, void* recv_data, int root = 0);
  NodeBuffer alloc_now(std::size_t bytes);  // alloc, once the earlier calls have run
  detail::CommState& st() const;            // throws InvalidUsage after a move
  std::unique_ptr<detail::CommState> state_;
};

}  // namespace synk
