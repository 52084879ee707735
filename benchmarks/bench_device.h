// The nccl rows' buffers: copies, on the communicator's CUDA device, of the host buffers every
// other row uses. Inputs are written on the host (fill_buffers, refill_input) and pushed; the
// result is pulled back for the #wrong check. The MPI baseline keeps the host buffers.
#pragma once

#include <cstddef>

#include "bench_colls.h"
#include "synk/device.h"

namespace synk::bench {

class DeviceMirror {
 public:
  DeviceMirror() = default;  // none: the rows use the host buffers
  // send_bytes and recv_bytes on `device`; throws synk::Error (NotSupported, or Backend when
  // cudaMalloc fails).
  DeviceMirror(int device, std::size_t send_bytes, std::size_t recv_bytes);

  explicit operator bool() const { return recv_.device() >= 0; }
  // The call `host` describes, on the device copies (placed() applies to it as to `host`).
  CallArgs on_device(const CallArgs& host) const;
  // Copies the call's send and recv (the whole of both: recv holds a broadcast's input and the
  // check's sentinel) from the host to the device. Blocking.
  void push(const CallArgs& host);
  // Copies `rank`'s result (its recv as placed()) back to the host. Blocking.
  void pull_result(const CallArgs& host, int rank) const;

 private:
  DeviceBuffer send_, recv_;  // on the device even when empty (a default one has none: -1)
};

}  // namespace synk::bench
