// bench_raw_nccl.h in a build without CUDA and NCCL.
#include "bench_raw_nccl.h"
#include "synk/error.h"

namespace synk::bench {

std::unique_ptr<RawNccl> RawNccl::create(MPI_Comm, int) {
  throw Error(ErrorCode::NotSupported, "--baseline nccl: synk was built without CUDA/NCCL");
}

}  // namespace synk::bench
