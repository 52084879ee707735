// See idx_reader.h. zlib's gz* functions read gzip and plain files alike.
#include "idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

namespace fmnist {

namespace {

// An open gzFile that is closed on every path out.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    if (!file_) {
      fail(std::string("cannot open: ") + (errno ? std::strerror(errno) : "out of memory"));
    }
    gzbuffer(file_, 1 << 17);
  }
  ~GzReader() {
    if (file_) gzclose(file_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes; fewer only at the end of the data. A damaged stream is an error.
  std::size_t read(void* buf, std::size_t n) {
    auto* out = static_cast<unsigned char*>(buf);
    std::size_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
      const int got = gzread(file_, out + done, chunk);
      if (got < 0) stream_error();
      if (got == 0) break;
      done += static_cast<std::size_t>(got);
    }
    // zlib reports a gzip stream cut short as Z_BUF_ERROR after handing out what it had.
    int err = Z_OK;
    gzerror(file_, &err);
    if (err != Z_OK) stream_error();
    return done;
  }

  [[noreturn]] void fail(const std::string& why) const { throw IdxError(path_ + ": " + why); }

 private:
  [[noreturn]] void stream_error() const {
    int err = Z_OK;
    const char* msg = gzerror(file_, &err);
    if (err == Z_BUF_ERROR) fail("truncated: the gzip stream ends early");
    if (err == Z_ERRNO) fail(std::string("read error: ") + std::strerror(errno));
    fail(std::string("corrupt gzip data: ") + (msg ? msg : "unknown error"));
  }

  std::string path_;
  gzFile file_ = nullptr;
};

std::uint32_t big_endian(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

}  // namespace

IdxArray read_idx(const std::string& path, int expected_ndims, std::size_t max_items) {
  GzReader in(path);
  unsigned char magic[4] = {};
  const std::size_t got = in.read(magic, 4);
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%02x%02x%02x%02x", magic[0], magic[1], magic[2], magic[3]);
  if (got < 4) in.fail("truncated: " + std::to_string(got) + " bytes, too short for an IDX header");
  if (magic[0] != 0 || magic[1] != 0) in.fail(std::string("not an IDX file (magic ") + hex + ")");
  if (magic[2] != 0x08) {
    in.fail(std::string("IDX element type ") + hex + " is not unsigned byte (0x08)");
  }
  if (magic[3] != expected_ndims) {
    in.fail("has " + std::to_string(magic[3]) + " dimensions, expected " +
            std::to_string(expected_ndims));
  }

  IdxArray out;
  std::vector<unsigned char> header(4 * static_cast<std::size_t>(expected_ndims));
  if (in.read(header.data(), header.size()) < header.size()) {
    in.fail("truncated: the header ends before its " + std::to_string(expected_ndims) +
            " dimensions");
  }
  std::size_t item_bytes = 1;
  for (int d = 0; d < expected_ndims; ++d) {
    const std::uint32_t n = big_endian(&header[4 * static_cast<std::size_t>(d)]);
    if (n == 0 || n > (1u << 30))
      in.fail("dimension " + std::to_string(d) + " is " + std::to_string(n));
    out.dims.push_back(n);
    if (d > 0) item_bytes *= n;
  }
  if (item_bytes > (std::size_t{1} << 30))
    in.fail("items of " + std::to_string(item_bytes) + " bytes");

  const std::size_t items =
      max_items > 0 ? std::min<std::size_t>(max_items, out.dims[0]) : out.dims[0];
  const std::size_t want = items * item_bytes;
  // Grown as the data arrives, so that a corrupt header's huge count is "truncated", not an
  // allocation failure.
  constexpr std::size_t kChunk = std::size_t{16} << 20;
  std::size_t have = 0;
  while (have < want) {
    const std::size_t n = std::min(kChunk, want - have);
    out.data.resize(have + n);
    const std::size_t got_now = in.read(out.data.data() + have, n);
    have += got_now;
    if (got_now < n) break;
  }
  if (have < want) {
    in.fail("truncated: " + std::to_string(have) + " of " + std::to_string(want) + " data bytes (" +
            std::to_string(items) + " items)");
  }
  if (max_items == 0) {
    unsigned char extra[64];
    const std::size_t more = in.read(extra, sizeof extra);  // also checks the gzip trailer
    if (more > 0) in.fail("trailing bytes after " + std::to_string(want) + " data bytes");
  } else {
    out.dims[0] = static_cast<std::uint32_t>(items);
  }
  return out;
}

}  // namespace fmnist
