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

void DeviceMirror::pull_result(const CallArgs& host, int rank) const {
  const CallArgs h = placed(host, rank);
  if (!h.recv) return;
  // In place, reduce_scatter's and scatter's result lies in the send buffer.
  const auto* in = static_cast<const unsigned char*>(h.recv);
  const auto* send = static_cast<const unsigned char*>(host.send);
  const bool in_send = send && in >= send && in < send + host.layout.send_bytes;
  const DeviceBuffer& from = in_send ? send_ : recv_;
  const auto* start = in_send ? send : static_cast<const unsigned char*>(host.recv);
  from.copy_to_host(h.recv, h.layout.recv_bytes, static_cast<std::size_t>(in - start));
}

}  // namespace synk::bench
