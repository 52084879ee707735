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
#include "core/mpi_watchdog.h"
#include "device/device_cuda.h"
#include "device/device_settings.h"
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
  // On nccl_device, kept from call to call; only when device != nccl_device. Two: a gather
  // stages its send and its receive.
  DeviceBuffer stage[2];

  std::size_t bytes() const { return count * size_of(dtype); }

  void peer_copy(void* dst, int dst_device, const void* src, int src_device, std::size_t n,
                 const char* op) {
    if (n == 0) return;
    const cudaStream_t s = copy_stream(nccl_device);
    DeviceGuard guard(nccl_device);
    SYNK_CHECK_CUDA(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, n, s));
    wait_stream(s, who + ": " + op);
  }

  // Where a collective on the NCCL device finds `n` bytes that live at `p` on `device`: p itself
  // when that is the NCCL device, else staging slot `slot`, filled from p first when copy_in.
  void* on_nccl(int slot, void* p, std::size_t n, bool copy_in, const char* op) {
    if (device == nccl_device) return p;
    DeviceBuffer& st = stage[slot];
    if (st.bytes() < n) {
      st = DeviceBuffer();  // free first: two of them may not fit
      st = DeviceBuffer(n, nccl_device);
    }
    if (copy_in) peer_copy(st.data(), nccl_device, p, device, n, op);
    return st.data();
  }
  // After the collective: what it wrote in slot `slot` back to p (nothing when p was not staged).
  void back_from_nccl(int slot, void* p, std::size_t n, const char* op) {
    if (device != nccl_device) peer_copy(p, device, stage[slot].data(), nccl_device, n, op);
  }

  // fn(device pointer on the NCCL device) runs the collective on the value, in place.
  template <class Fn>
  void collective(const char* op, Fn&& fn) {
    fn(on_nccl(0, value.data(), bytes(), true, op));
    back_from_nccl(0, value.data(), bytes(), op);
  }

  void check_root(int root, const char* op) const {
    const int n = comm->size();
    if (root < 0 || root >= n) {
      throw Error(ErrorCode::InvalidArgument, who + ": " + op + ": root " + std::to_string(root) +
                                                  " is out of range for " + std::to_string(n) +
                                                  " ranks (valid: 0.." + std::to_string(n - 1) +
                                                  ")");
    }
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
  const bool routed = routes_by_memory(comm);  // auto: NCCL starts at the first device call
  const bool on_device = comm.device() >= 0;     // its collectives run on a device (nccl)
  if (!on_device && !routed) {
    throw Error(ErrorCode::NotSupported,
                m.who +
                    ": a value in device memory needs a communicator on the nccl backend or on "
                    "auto, but this one uses '" +
                    comm.backend() + "' (create it with CommOptions{\"nccl\"} or \"auto\")");
  }
  const std::optional<int> nccl = nccl_process_device();
  if (!nccl && !routed) {  // an nccl communicator exists, so its bootstrap chose the device
    throw Error(ErrorCode::InvalidUsage, m.who + ": the NCCL device of this process is not known");
  }
  // On auto before NCCL has started: the device its bootstrap will choose, chosen now.
  m.nccl_device = nccl ? *nccl : choose_process_device(comm.local_rank());
  if (context.empty()) {
    m.device = m.nccl_device;
  } else {
    m.device = lookup_context(parse_contexts(device_settings().contexts), context, m.who);
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
  // The root's shape travels over MPI (host memory), so the other ranks can size their arrays
  // before NCCL moves the values.
  share_dims(root, dims);
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

DeviceBuffer DeviceValue::gatherv(int root, const std::vector<std::size_t>& counts) {
  Impl& m = *impl_;
  m.check_root(root, "gather");
  const bool at_root = m.comm->rank() == root;
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  const std::size_t out_bytes = total * size_of(m.dtype);
  DeviceBuffer out = at_root ? DeviceBuffer(out_bytes, m.device) : DeviceBuffer();
  void* send = m.on_nccl(0, m.value.data(), m.bytes(), true, "gather");
  void* recv = at_root ? m.on_nccl(1, out.data(), out_bytes, false, "gather") : nullptr;
  m.comm->gatherv(send, m.count, recv, counts, m.dtype, root);
  if (at_root) m.back_from_nccl(1, out.data(), out_bytes, "gather");
  return out;
}

void DeviceValue::broadcast_buffer(DeviceBuffer& buffer, std::size_t count, int root) {
  Impl& m = *impl_;
  m.check_root(root, "broadcast");
  const bool at_root = m.comm->rank() == root;
  const std::size_t bytes = count * size_of(m.dtype);
  if (!at_root && (buffer.bytes() != bytes || buffer.device() != m.device)) {
    buffer = DeviceBuffer();
    buffer = DeviceBuffer(bytes, m.device);
  }
  void* p = m.on_nccl(0, buffer.data(), bytes, at_root, "broadcast");
  m.comm->broadcast(p, count, m.dtype, root);
  if (!at_root) m.back_from_nccl(0, buffer.data(), bytes, "broadcast");
}

DeviceBuffer DeviceValue::copy() const {
  const Impl& m = *impl_;
  DeviceBuffer out(m.bytes(), m.device);
  copy_and_wait(out.data(), m.value.data(), m.bytes(), cudaMemcpyDeviceToDevice, m.device,
                m.who + ": get_value");
  return out;
}

void DeviceValue::keep(std::size_t first, std::size_t count) {
  Impl& m = *impl_;
  const std::size_t es = size_of(m.dtype);
  DeviceBuffer part(count * es, m.device);
  copy_and_wait(part.data(), static_cast<const unsigned char*>(m.value.data()) + first * es,
                count * es, cudaMemcpyDeviceToDevice, m.device, m.who + ": scatter");
  m.value = std::move(part);
  m.count = count;
}

void DeviceValue::take(DeviceBuffer buffer, std::size_t count) {
  Impl& m = *impl_;
  if (buffer.bytes() != count * size_of(m.dtype) || (count > 0 && buffer.device() != m.device)) {
    throw Error(ErrorCode::InvalidArgument,
                m.who + ": a buffer of " + std::to_string(buffer.bytes()) + " bytes on cuda" +
                    std::to_string(buffer.device()) + " cannot hold its " +
                    std::to_string(count) + " elements on cuda" + std::to_string(m.device));
  }
  m.value = std::move(buffer);
  m.count = count;
}

void DeviceValue::share_dims(int root, std::vector<std::uint64_t>& dims) {
  const Impl& m = *impl_;
  m.check_root(root, "broadcast");
  const MPI_Comm mpi = m.comm->mpi_comm();
  const MpiWatch watch = watch_step("DeviceShared: the root's shape", mpi);
  std::uint64_t ndim = dims.size();
  SYNK_CHECK_MPI(MPI_Bcast(&ndim, 1, MPI_UINT64_T, root, mpi));
  dims.resize(ndim);
  SYNK_CHECK_MPI(MPI_Bcast(dims.data(), static_cast<int>(ndim), MPI_UINT64_T, root, mpi));
}

std::vector<std::vector<std::uint64_t>> DeviceValue::all_dims(
    const std::vector<std::uint64_t>& mine) {
  const MPI_Comm mpi = impl_->comm->mpi_comm();
  const MpiWatch watch = watch_step("DeviceShared: the ranks' shapes", mpi);
  const int n = impl_->comm->size();
  int ndim = static_cast<int>(mine.size());
  std::vector<int> ndims(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  SYNK_CHECK_MPI(MPI_Allgather(&ndim, 1, MPI_INT, ndims.data(), 1, MPI_INT, mpi));
  int total = 0;
  for (int r = 0; r < n; ++r) {
    displs[static_cast<std::size_t>(r)] = total;
    total += ndims[static_cast<std::size_t>(r)];
  }
  std::vector<std::uint64_t> flat(static_cast<std::size_t>(total));
  SYNK_CHECK_MPI(MPI_Allgatherv(mine.data(), ndim, MPI_UINT64_T, flat.data(), ndims.data(),
                                displs.data(), MPI_UINT64_T, mpi));
  std::vector<std::vector<std::uint64_t>> out;
  for (int r = 0; r < n; ++r) {
    const auto begin = flat.begin() + displs[static_cast<std::size_t>(r)];
    out.emplace_back(begin, begin + ndims[static_cast<std::size_t>(r)]);
  }
  return out;
}

bool DeviceValue::root_says(int root, bool ok) {
  impl_->check_root(root, "set_value");
  const MpiWatch watch = watch_step("DeviceShared::set_value", impl_->comm->mpi_comm());
  int flag = ok ? 1 : 0;
  SYNK_CHECK_MPI(MPI_Bcast(&flag, 1, MPI_INT, root, impl_->comm->mpi_comm()));
  return flag != 0;
}

}  // namespace synk::detail
