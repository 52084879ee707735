// MpiBackend: every collective on any MPI communicator, any node layout. The fallback backend.
// Counts above the MPI int limit are split into chunks; float16/bfloat16 reductions are staged
// through float so they accumulate in float and round once.
#pragma once

#include <vector>

#include "core/backend.h"

namespace synk::detail {

// avg = sum * (1/n) in the accumulation type: float (float32, and the float staging of 16-bit
// types) or double (float64). Used after an MPI_SUM.
void scale_avg(void* buf, std::size_t count, DataType t, int n);

class MpiBackend final : public Backend {
 public:
  explicit MpiBackend(const CommContext& ctx);
  BackendKind kind() const override { return BackendKind::mpi; }
  bool waits_in_mpi() const override { return true; }
  Request all_reduce(const CollArgs& a) override;
  Request reduce(const CollArgs& a) override;
  Request broadcast(const CollArgs& a) override;
  Request all_gather(const CollArgs& a) override;
  Request gather(const CollArgs& a) override;
  Request gatherv(const CollArgs& a) override;
  Request scatter(const CollArgs& a) override;
  Request scatterv(const CollArgs& a) override;
  Request reduce_scatter(const CollArgs& a) override;
  Request all_to_all(const CollArgs& a) override;
  Request all_to_allv(const CollArgs& a) override;
  Request barrier() override;

 private:
  // Gather-like calls (all_gather, gather, scatter) whose per-rank count exceeds one MPI call.
  void gather_like_chunked(const CollArgs& a);
  template <class Move, class Start, class Own>
  void by_blocks(const CollArgs& a, Move&& move, Start&& start, Own&& own,
                 const char* receiving_root);
  float* stage(std::vector<float>& v, std::size_t n);
  // MPI_Allreduce, MPI_Reduce and MPI_Bcast on ctx_.comm (KeyValue's calls), or where the
  // communicator yields the core the non-blocking ones, waited for by wait_yielding.
  void allreduce(const void* send, void* recv, int n, MPI_Datatype t, MPI_Op op);
  void reduce(const void* send, void* recv, int n, MPI_Datatype t, MPI_Op op, int root);
  void bcast(void* buf, int n, MPI_Datatype t, int root);
  // Calls up to this size wait in wait_yielding where the communicator yields the core.
  static constexpr long long kYieldingBytes = 64 * 1024;
  bool yields(int n, MPI_Datatype t) const;
  void wait_yielding(MPI_Request& req);

  CommContext ctx_;
  std::size_t max_chunk_;  // elements per MPI call (INT_MAX, or SYNK_MPI_MAX_CHUNK for tests)
  std::size_t stage_chunk_;  // elements per staged (converted or packed) chunk
  std::vector<float> stage_in_, stage_out_;
  std::vector<unsigned char> pack_;
};

}  // namespace synk::detail
