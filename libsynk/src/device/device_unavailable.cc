// The device API in a build without CUDA/NCCL: every type exists, so programs compile the same
// way everywhere, and every entry point that would touch a device throws NotSupported.
#include <string>

#include "synk/device.h"

namespace synk {

namespace {

[[noreturn]] void unavailable(const std::string& who) {
  throw Error(ErrorCode::NotSupported,
              who +
                  ": synk was built without CUDA/NCCL (configured with SYNK_WITH_NCCL=OFF or "
                  "without the CUDA toolkit and NCCL), so device memory is not available");
}

}  // namespace

int device_count() { unavailable("device_count"); }

DeviceBuffer::DeviceBuffer(std::size_t bytes, int device) {
  (void)bytes;
  (void)device;
  unavailable("DeviceBuffer");
}
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept = default;
void DeviceBuffer::release() noexcept {}
// A default-constructed buffer holds nothing: copying zero bytes is allowed everywhere.
void DeviceBuffer::copy_from_host(const void* src, std::size_t bytes, std::size_t offset) {
  (void)src;
  if (bytes != 0 || offset != 0) unavailable("DeviceBuffer::copy_from_host");
}
void DeviceBuffer::copy_to_host(void* dst, std::size_t bytes, std::size_t offset) const {
  (void)dst;
  if (bytes != 0 || offset != 0) unavailable("DeviceBuffer::copy_to_host");
}

namespace detail {

struct DeviceValue::Impl {};

DeviceValue::DeviceValue(Communicator& comm, const std::string& name, const std::string& context,
                         DataType dtype) {
  (void)comm;
  (void)context;
  (void)dtype;
  unavailable("DeviceShared '" + name + "'");
}
DeviceValue::~DeviceValue() = default;
DeviceValue::DeviceValue(DeviceValue&&) noexcept = default;
DeviceValue& DeviceValue::operator=(DeviceValue&&) noexcept = default;
// Unreachable: no DeviceValue can be constructed in this build.
int DeviceValue::device() const { return -1; }
std::size_t DeviceValue::count() const { return 0; }
void* DeviceValue::data() const { return nullptr; }
void DeviceValue::assign(const void*, std::size_t) { unavailable("DeviceShared"); }
void DeviceValue::read(void*, std::size_t) const { unavailable("DeviceShared"); }
void DeviceValue::broadcast(int, std::vector<std::uint64_t>&) { unavailable("DeviceShared"); }
void DeviceValue::all_reduce(ReduceOp) { unavailable("DeviceShared"); }
void DeviceValue::reduce(ReduceOp, int) { unavailable("DeviceShared"); }
DeviceBuffer DeviceValue::gatherv(int, const std::vector<std::size_t>&) {
  unavailable("DeviceShared");
}
void DeviceValue::broadcast_buffer(DeviceBuffer&, std::size_t, int) {
  unavailable("DeviceShared");
}
DeviceBuffer DeviceValue::copy() const { unavailable("DeviceShared"); }
void DeviceValue::keep(std::size_t, std::size_t) { unavailable("DeviceShared"); }
void DeviceValue::take(DeviceBuffer, std::size_t) { unavailable("DeviceShared"); }
void DeviceValue::share_dims(int, std::vector<std::uint64_t>&) { unavailable("DeviceShared"); }
std::vector<std::vector<std::uint64_t>> DeviceValue::all_dims(const std::vector<std::uint64_t>&) {
  unavailable("DeviceShared");
}
bool DeviceValue::root_says(int, bool) { unavailable("DeviceShared"); }

}  // namespace detail

struct DeviceStager::Impl {};

DeviceStager::DeviceStager(int device) {
  (void)device;
  unavailable("DeviceStager");
}
DeviceStager::~DeviceStager() = default;
std::size_t DeviceStager::stage(const void*, std::size_t, std::size_t, const RowSelection&, void*,
                                Stream) {
  unavailable("DeviceStager::stage");
}
void DeviceStager::wait() { unavailable("DeviceStager::wait"); }
int DeviceStager::device() const { return -1; }
Stream DeviceStager::stream() const { return nullptr; }
std::size_t DeviceStager::pinned_bytes() const { return 0; }

}  // namespace synk
