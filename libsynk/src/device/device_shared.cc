// detail::DeviceValue, the untyped part of DeviceShared<T> (builds with CUDA/NCCL only): the
// value's device array, its device (the NCCL device, or the one a context name maps to), and the
// collectives on it through the communicator's nccl backend. A value on another device than the
// NCCL one goes through a staging array on the NCCL device, by peer copies, since NCCL's
// kernels run on the communicator's device.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/nccl/nccl_comm.h"
#include "core/contexts.h"
#include "core/env.h"
#include "core/logging.h"
#include "core/mpi_check.h"
#include "device/device_cuda.h"
#include "synk/device.h"

namespace synk::detail {

struct DeviceValue::Impl {
  Communicator* comm = nullptr;
  std::string who;  // "DeviceShared 'w'", for messages
  DataType dtype = DataType::uint8;
  int device = -1;       // where the value lives
  int nccl_device = -1;  // where the communicator's collectives run
  std::size_t count = 0;
  DeviceBuffer value;
  DeviceBuffer stage;  // on nccl_device, kept from call to call; only when device != nccl_device

  std::size_t bytes() const { return count * size_of(dtype); }

  void peer_copy(void* dst, int dst_device, const void* src, int src_device, const char* op) {
    if (bytes() == 0) return;
    const cudaStream_t s = copy_stream(nccl_device);
    DeviceGuard guard(nccl_device);
    SYNK_CHECK_CUDA(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes(), s));
    wait_stream(s, who + ": " + op);
  }

  // fn(device pointer on the NCCL device) runs the collective.
  template <class Fn>
  void collective(const char* op, Fn&& fn) {
    if (device == nccl_device) {
      fn(value.data());
      return;
    }
    if (stage.bytes() < bytes()) {
      stage = DeviceBuffer();  // free first: two of them may not fit
      stage = DeviceBuffer(bytes(), nccl_device);
    }
    peer_copy(stage.data(), nccl_device, value.data(), device, op);
    fn(stage.data());
    peer_copy(value.data(), device, stage.data(), nccl_device, op);
  }

  void reallocate(std::size_t n) {
    if (n == count && (n == 0 || value.data())) return;
    value = DeviceBuffer();
    value = DeviceBuffer(n * size_of(dtype), device);
    count = n;
  }
};

DeviceValue::DeviceValue(Communicator& comm, const std::string& name, const std::string& context,
                         DataType dtype)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.comm = &comm;
  m.who = "DeviceShared '" + name + "'";
  m.dtype = dtype;
  if (comm.backend() != "nccl") {
    throw Error(ErrorCode::NotSupported,
                m.who +
                    ": a value in device memory needs a communicator on the nccl backend, but "
                    "this one uses '" +
                    comm.backend() +
                    "' (create it with CommOptions{\"nccl\"} or SYNK_BACKEND=nccl)");
  }
  const std::optional<int> nccl = nccl_process_device();
  if (!nccl) {  // an nccl communicator exists, so its bootstrap chose the device
    throw Error(ErrorCode::InvalidUsage, m.who + ": the NCCL device of this process is not known");
  }
  m.nccl_device = *nccl;
  if (context.empty()) {
    m.device = m.nccl_device;
  } else {
    m.device = lookup_context(parse_contexts(settings().contexts), context, m.who);
    check_visible(m.device,
                  m.who + " (context '" + context + "' -> cuda" + std::to_string(m.device) + ")");
  }
  SYNK_LOG_AT(info, m.who << ": " << to_string(dtype) << " on cuda" << m.device
                          << (context.empty() ? std::string(" (the NCCL device)")
                                              : " (context '" + context + "')")
                          << (m.device == m.nccl_device
                                  ? std::string()
                                  : "; collectives staged through cuda" +
                                        std::to_string(m.nccl_device) + ", the NCCL device"));
}

DeviceValue::~DeviceValue() = default;
DeviceValue::DeviceValue(DeviceValue&&) noexcept = default;
DeviceValue& DeviceValue::operator=(DeviceValue&&) noexcept = default;

int DeviceValue::device() const { return impl_->device; }
std::size_t DeviceValue::count() const { return impl_->count; }
void* DeviceValue::data() const { return impl_->value.data(); }

void DeviceValue::assign(const void* host, std::size_t count) {
  impl_->reallocate(count);
  impl_->value.copy_from_host(host, impl_->bytes());
}

void DeviceValue::read(void* host, std::size_t count) const {
  if (count != impl_->count) {
    throw Error(ErrorCode::InvalidArgument, impl_->who + ": reading " + std::to_string(count) +
                                                " elements of a value of " +
                                                std::to_string(impl_->count));
  }
  impl_->value.copy_to_host(host, impl_->bytes());
}

void DeviceValue::broadcast(int root, std::vector<std::uint64_t>& dims) {
  Impl& m = *impl_;
  const int n = m.comm->size();
  if (root < 0 || root >= n) {
    throw Error(ErrorCode::InvalidArgument, m.who + ": broadcast: root " + std::to_string(root) +
                                                " is out of range for " + std::to_string(n) +
                                                " ranks (valid: 0.." + std::to_string(n - 1) + ")");
  }
  // The root's shape travels over MPI (host memory), so the other ranks can size their arrays
  // before NCCL moves the values.
  const MPI_Comm mpi = m.comm->mpi_comm();
  std::uint64_t ndim = dims.size();
  SYNK_CHECK_MPI(MPI_Bcast(&ndim, 1, MPI_UINT64_T, root, mpi));
  dims.resize(ndim);
  SYNK_CHECK_MPI(MPI_Bcast(dims.data(), static_cast<int>(ndim), MPI_UINT64_T, root, mpi));
  std::size_t count = 1;
  for (std::uint64_t d : dims) count *= d;
  if (m.comm->rank() != root) m.reallocate(count);
  m.collective("broadcast", [&](void* p) { m.comm->broadcast(p, m.count, m.dtype, root); });
}

void DeviceValue::all_reduce(ReduceOp op) {
  Impl& m = *impl_;
  m.collective("all_reduce", [&](void* p) { m.comm->all_reduce(p, p, m.count, m.dtype, op); });
}

void DeviceValue::reduce(ReduceOp op, int root) {
  Impl& m = *impl_;
  m.collective("reduce", [&](void* p) { m.comm->reduce(p, p, m.count, m.dtype, op, root); });
}

}  // namespace synk::detail
