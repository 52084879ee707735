// See bench_device.h.
#include "bench_device.h"

namespace synk::bench {

DeviceMirror::DeviceMirror(int device, std::size_t send_bytes, std::size_t recv_bytes)
    : send_(send_bytes, device), recv_(recv_bytes, device) {}

CallArgs DeviceMirror::on_device(const CallArgs& host) const {
  CallArgs d = host;
  d.send = host.send ? send_.data() : nullptr;
  d.recv = host.recv ? recv_.data() : nullptr;
  return d;
}

void DeviceMirror::push(const CallArgs& host) {
  if (host.send) send_.copy_from_host(host.send, host.layout.send_bytes);
  if (host.recv) recv_.copy_from_host(host.recv, host.layout.recv_bytes);
}

void DeviceMirror::pull_result(const CallArgs& host) const {
  if (host.recv) recv_.copy_to_host(host.recv, host.layout.recv_bytes);
}

}  // namespace synk::bench
