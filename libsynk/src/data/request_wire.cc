// See synk/distribute.h (detail::send_request, receive_request): a master's request as bytes,
// the same layout on every rank of one job. The first kPacketBytes travel in one polled message
// to each worker, so a small request is a single message; the rest of a larger one follows in a
// synk broadcast.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "data/request_packet.h"
#include "synk/distribute.h"

namespace synk::detail {

namespace {

constexpr std::size_t kPacketBytes = 2048;
// DrivenArgs travels as its bytes.
static_assert(std::is_trivially_copyable_v<DrivenArgs> && sizeof(DrivenArgs) == 24);

struct Writer {
  std::vector<unsigned char> b;
  void raw(const void* p, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    b.insert(b.end(), c, c + n);
  }
  void u64(std::uint64_t v) { raw(&v, sizeof v); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
};

struct Reader {
  const unsigned char* p;
  void raw(void* dst, std::size_t n) {
    if (n) std::memcpy(dst, p, n);
    p += n;
  }
  std::uint64_t u64() {
    std::uint64_t v;
    raw(&v, sizeof v);
    return v;
  }
  std::string str() {
    std::string s(u64(), '\0');
    raw(s.data(), s.size());
    return s;
  }
};

// [total bytes, kind, op, args, slices, name, data names, array shapes, inputs, selection].
std::vector<unsigned char> encode(const DriveRequest& m) {
  Writer w;
  w.b.reserve(kPacketBytes);  // one allocation for the usual request
  w.u64(0);  // total size, filled in below
  w.u64(static_cast<std::uint64_t>(m.kind));
  w.u64(static_cast<std::uint64_t>(m.op));
  w.raw(&m.args, sizeof m.args);
  w.u64(static_cast<std::uint64_t>(m.num_slices));
  w.str(m.name);
  w.u64(m.data.size());
  for (const std::string& d : m.data) w.str(d);
  w.u64(m.array_shapes.size());
  for (const std::vector<std::uint64_t>& shape : m.array_shapes) {
    w.u64(shape.size());
    w.raw(shape.data(), shape.size() * sizeof(std::uint64_t));
  }
  w.u64(m.inputs.size());
  for (const std::vector<unsigned char>& v : m.inputs) {
    w.u64(v.size());
    w.raw(v.data(), v.size());
  }
  w.u64(m.selection.start);
  w.u64(m.selection.count);
  w.u64(m.selection.step);
  w.u64(m.selection.indices.size());
  w.raw(m.selection.indices.data(), m.selection.indices.size() * sizeof(std::size_t));
  const std::uint64_t total = w.b.size();
  std::memcpy(w.b.data(), &total, sizeof total);
  return w.b;
}

DriveRequest decode(const std::vector<unsigned char>& bytes) {
  Reader r{bytes.data() + sizeof(std::uint64_t)};
  DriveRequest m;
  m.kind = static_cast<DriveRequest::Kind>(r.u64());
  m.op = static_cast<DrivenOp>(r.u64());
  r.raw(&m.args, sizeof m.args);
  m.num_slices = static_cast<std::int32_t>(r.u64());
  m.name = r.str();
  m.data.resize(r.u64());
  for (std::string& d : m.data) d = r.str();
  m.array_shapes.resize(r.u64());
  for (std::vector<std::uint64_t>& shape : m.array_shapes) {
    shape.resize(r.u64());
    r.raw(shape.data(), shape.size() * sizeof(std::uint64_t));
  }
  m.inputs.resize(r.u64());
  for (std::vector<unsigned char>& v : m.inputs) {
    v.resize(r.u64());
    r.raw(v.data(), v.size());
  }
  m.selection.start = r.u64();
  m.selection.count = r.u64();
  m.selection.step = r.u64();
  m.selection.indices.resize(r.u64());
  r.raw(m.selection.indices.data(), m.selection.indices.size() * sizeof(std::size_t));
  return m;
}

}  // namespace

void send_request(Communicator& comm, const DriveRequest& request, const PeerWatch& watch) {
  std::vector<unsigned char> bytes = encode(request);
  const std::size_t total = bytes.size();
  packet_send(comm, bytes, std::min(total, kPacketBytes), watch);
  if (total > kPacketBytes) {
    comm.broadcast(bytes.data() + kPacketBytes, total - kPacketBytes, DataType::uint8, 0);
  }
}

DriveRequest receive_request(Communicator& comm, const PeerWatch& watch) {
  // Kept from request to request: a worker receives one at a time. (A receive abandoned by a
  // throw takes the buffer away for good, and the next one starts a new one.)
  thread_local std::vector<unsigned char> bytes;
  bytes.resize(kPacketBytes);
  packet_receive(comm, bytes, watch);
  std::uint64_t total = 0;
  std::memcpy(&total, bytes.data(), sizeof total);
  if (total > kPacketBytes) {
    bytes.resize(total);
    comm.broadcast(bytes.data() + kPacketBytes, total - kPacketBytes, DataType::uint8, 0);
  }
  return decode(bytes);
}

}  // namespace synk::detail
