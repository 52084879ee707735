// The collectives synk-bench measures: their names, buffer layouts and busbw factors, and one
// call of each through synk and through the raw MPI function that is its baseline.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <optional>
#include <string_view>

#include "synk/communicator.h"
#include "synk/types.h"

namespace synk::bench {

enum class Coll {
  allreduce,
  broadcast,
  reduce,
  allgather,
  reduce_scatter,
  gather,
  scatter,
  alltoall
};

const char* to_string(Coll c) noexcept;
std::optional<Coll> parse_coll(std::string_view name);
bool uses_op(Coll c) noexcept;
bool has_root(Coll c) noexcept;
// Blocked collectives split the buffer into one block per rank (allgather, reduce_scatter,
// gather, scatter, alltoall); size (as in nccl-tests) and count then describe the whole buffer.
bool is_blocked(Coll c) noexcept;
// nccl-tests' PERFORMANCE.md: busbw = algbw * factor.
double busbw_factor(Coll c, int nranks) noexcept;

// Where the elements are for one row. count is what the table prints: the whole buffer's
// elements; block is what one rank contributes or receives (count / nranks when blocked).
struct Layout {
  std::size_t count = 0;
  std::size_t block = 0;
  std::size_t bytes = 0;       // count * element size: the size(B) column
  std::size_t send_bytes = 0;  // per rank (the root's for scatter)
  std::size_t recv_bytes = 0;  // per rank (the root's for gather)
};

// The layout for a step of `bytes` (rounded down to whole elements, and to a multiple of
// nranks when blocked); count == 0 when the step is too small to hold one element per rank.
Layout make_layout(Coll c, std::size_t bytes, DataType dtype, int nranks);

struct CallArgs {
  Coll coll;
  Layout layout;
  DataType dtype;
  ReduceOp op;
  int root;
  void* send;  // broadcast uses recv only, as its one buffer
  void* recv;
  bool nonblocking = false;  // -N 1: the non-blocking call, then wait()
  // -I 1: the call in place; send and recv are still the two buffers, and placed() gives the
  // pointers a rank passes.
  bool in_place = false;
};

// The send and recv `rank` passes: with in_place, one inside the other by NCCL's conventions
// (send == recv; all_gather's send at its block of recv, gather's at the root's; reduce_scatter's
// recv at its block of send, scatter's at the root's); else a itself.
CallArgs placed(const CallArgs& a, int rank);

void call_synk(Communicator& comm, const CallArgs& a);

// Overwrites every byte of what `rank`'s call reads (its send buffer; the root's recv for
// broadcast; nothing where the rank sends nothing) with `value`. A byte value of 0x3c or 0x3d
// makes normal, finite numbers of every dtype, so reductions run at their usual speed.
void refill_input(const CallArgs& a, int rank, unsigned char value);

// The raw MPI call has an MPI datatype for this dtype (none for float16/bfloat16 reductions)
// and int-sized counts.
bool mpi_has_baseline(const CallArgs& a);
// The same collective through MPI (MPI_Allreduce, MPI_Bcast, ...) on comm; avg runs as
// MPI_SUM, since MPI has no average. Throws std::runtime_error when MPI reports an error.
void call_mpi(MPI_Comm comm, const CallArgs& a);

}  // namespace synk::bench
