// An LD_PRELOAD stand-in for the few CUDA runtime calls the NCCL backend makes before NCCL
// itself: every rank sees one device, at PCI 0000:00:00.0, so that two ranks of one host share
// it, which the bootstrap must refuse before NCCL is involved. With SYNK_FAKE_DISTINCT_BUS=1 the
// bus is the MPI rank (0000:0r:00.0): the ranks then reach NCCL's init, which fails on a machine
// without a driver, and that failure must come back as an error, not a hang. Test-only.
#include <cstdio>
#include <cstdlib>

extern "C" {

namespace {
int current_device = 0;
}  // namespace

int cudaGetDeviceCount(int* count) {
  *count = 1;
  return 0;  // cudaSuccess
}

int cudaSetDevice(int device) {
  if (device != 0) return 101;  // cudaErrorInvalidDevice
  current_device = device;
  return 0;
}

int cudaGetDevice(int* device) {
  *device = current_device;
  return 0;
}

int cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  (void)device;
  const char* distinct = std::getenv("SYNK_FAKE_DISTINCT_BUS");
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const int bus = distinct && distinct[0] == '1' && rank ? std::atoi(rank) : 0;
  std::snprintf(bus_id, static_cast<std::size_t>(len), "0000:%02x:00.0", bus);
  return 0;
}

}  // extern "C"
