// See synk/agreement.h. One protocol over two transports: a Communicator's own collectives, so
// that a rank that died is found by its backend's liveness checks instead of hanging the rest
// in MPI, and plain MPI, for what runs before a Communicator exists. MPI errors are
// synk::Errors, as for every MPI call synk makes.
#include "synk/agreement.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "core/mpi_check.h"
#include "synk/communicator.h"

namespace synk {

namespace {

struct OverMpi {
  MPI_Comm comm;
  int rank() const {
    int r = 0;
    SYNK_CHECK_MPI(MPI_Comm_rank(comm, &r));
    return r;
  }
  int size() const {
    int s = 0;
    SYNK_CHECK_MPI(MPI_Comm_size(comm, &s));
    return s;
  }
  int min(int mine) const {
    int out = 0;
    SYNK_CHECK_MPI(MPI_Allreduce(&mine, &out, 1, MPI_INT, MPI_MIN, comm));
    return out;
  }
  void broadcast(void* bytes, std::size_t n, int root) const {
    SYNK_CHECK_MPI(MPI_Bcast(bytes, static_cast<int>(n), MPI_BYTE, root, comm));
  }
};

struct OverCommunicator {
  Communicator& comm;
  int rank() const { return comm.rank(); }
  int size() const { return comm.size(); }
  int min(int mine) const {
    std::int32_t v = mine;
    comm.all_reduce(&v, &v, 1, DataType::int32, ReduceOp::min);
    return v;
  }
  void broadcast(void* bytes, std::size_t n, int root) const {
    comm.broadcast(bytes, n, DataType::uint8, root);
  }
};

template <class Over>
std::string text_over(const Over& over, int root, std::string_view text) {
  // A byte count that MPI takes as an int: a text of 2 GiB or more is no failure's, and is cut.
  const std::size_t most = INT_MAX;
  const bool is_root = over.rank() == root;
  std::int32_t length = is_root ? static_cast<std::int32_t>(std::min(text.size(), most)) : 0;
  over.broadcast(&length, sizeof length, root);
  const auto n = static_cast<std::size_t>(length);
  std::string out = is_root ? std::string(text.substr(0, n)) : std::string(n, '\0');
  over.broadcast(out.data(), out.size(), root);
  return out;
}

template <class Over>
std::optional<RankFailure> first_failure_over(const Over& over, bool failed, std::string_view text,
                                              int node) {
  const int size = over.size();
  const int first = over.min(failed ? over.rank() : size);
  if (first == size) return std::nullopt;
  std::int32_t first_node = node;
  over.broadcast(&first_node, sizeof first_node, first);
  return RankFailure{first, first_node, text_over(over, first, text)};
}

}  // namespace

std::optional<RankFailure> first_failure(MPI_Comm comm, bool failed, std::string_view text,
                                         int node) {
  return first_failure_over(OverMpi{comm}, failed, text, node);
}

// A communicator whose calls run on a device (nccl) takes device buffers only: its agreement
// goes through MPI on the same ranks.
std::optional<RankFailure> first_failure(Communicator& comm, bool failed,
                                         std::string_view text) {
  if (comm.device() >= 0) return first_failure(comm.mpi_comm(), failed, text, comm.node());
  return first_failure_over(OverCommunicator{comm}, failed, text, comm.node());
}

std::string text_from(MPI_Comm comm, int root, std::string_view text) {
  return text_over(OverMpi{comm}, root, text);
}

std::string text_from(Communicator& comm, int root, std::string_view text) {
  if (comm.device() >= 0) return text_from(comm.mpi_comm(), root, text);
  return text_over(OverCommunicator{comm}, root, text);
}

}  // namespace synk
