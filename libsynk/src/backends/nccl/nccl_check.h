// SYNK_CHECK_CUDA(expr) and SYNK_CHECK_NCCL(expr): a CUDA or NCCL return code other than success
// becomes a synk::Error(Backend) with the call's text and the library's own message. Private to
// the NCCL backend: the only files of libsynk that include CUDA and NCCL headers.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "synk/error.h"

// ncclCommInitRankConfig with non-blocking communicators and ncclGetLastError need 2.14.
#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "synk's NCCL backend needs NCCL >= 2.14 (or configure with -DSYNK_WITH_NCCL=OFF)"
#endif

namespace synk::detail {

// "unhandled cuda error (run with NCCL_DEBUG=INFO for details): <ncclGetLastError text>"
std::string nccl_message(ncclResult_t rc);

[[noreturn]] void throw_cuda_error(cudaError_t rc, const char* call);
[[noreturn]] void throw_nccl_error(ncclResult_t rc, const char* call);

}  // namespace synk::detail

#define SYNK_CHECK_CUDA(expr)                                                                 \
  do {                                                                                        \
    const cudaError_t synk_cuda_rc_ = (expr);                                                 \
    if (synk_cuda_rc_ != cudaSuccess) ::synk::detail::throw_cuda_error(synk_cuda_rc_, #expr); \
  } while (0)

// For calls that complete before they return (ncclGetUniqueId, ...). Calls on a non-blocking
// communicator may also return ncclInProgress; NcclComm::issue handles those.
#define SYNK_CHECK_NCCL(expr)                                                                 \
  do {                                                                                        \
    const ncclResult_t synk_nccl_rc_ = (expr);                                                \
    if (synk_nccl_rc_ != ncclSuccess) ::synk::detail::throw_nccl_error(synk_nccl_rc_, #expr); \
  } while (0)
