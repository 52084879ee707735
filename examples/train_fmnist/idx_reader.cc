// See idx_reader.h. zlib's gz* functions read gzip and plain files alike.
#include "idx_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

namespace fmnist {

namespace {

// An open gzFile that is closed on every path out, and the file's size on disk.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      file_bytes_ = static_cast<std::uint64_t>(st.st_size);
    }
    file_ = gzdopen(fd, "rb");
    if (!file_) {
      close(fd);
      fail("cannot open: out of memory");
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

  // The most bytes the whole file can give (decompressed), or 0 when unknown (not a regular
  // file). Valid after the first read, when zlib knows whether the file is gzip or plain.
  std::uint64_t max_content_bytes() const {
    // Deflate's densest code (a 258-byte match in 2 bits) makes at most 1032 bytes of a byte.
    constexpr std::uint64_t kMaxRatio = 1032;
    if (!compressed()) return file_bytes_;
    return std::min(file_bytes_, std::numeric_limits<std::uint64_t>::max() / kMaxRatio) *
           kMaxRatio;
  }
  bool compressed() const { return gzdirect(file_) == 0; }
  std::uint64_t file_bytes() const { return file_bytes_; }

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
  std::uint64_t file_bytes_ = 0;  // the size on disk; 0 when unknown
};

std::uint32_t big_endian(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

// Fails before any data is allocated when the file cannot hold `want` data bytes after its
// header, so that a corrupt count costs no memory: a plain file holds its size, a gzip file at
// most 1032 times its size.
void check_room(const GzReader& in, std::size_t want, std::size_t items, std::size_t header_bytes) {
  const std::uint64_t most = in.max_content_bytes();
  if (most == 0) return;  // not a regular file: read_growing bounds the memory instead
  const std::uint64_t room = most > header_bytes ? most - header_bytes : 0;
  if (want <= room) return;
  if (!in.compressed()) {
    in.fail("truncated: " + std::to_string(room) + " of " + std::to_string(want) +
            " data bytes (" + std::to_string(items) + " items)");
  }
  in.fail("truncated: " + std::to_string(items) + " items need " + std::to_string(want) +
          " data bytes, more than a gzip file of " + std::to_string(in.file_bytes()) +
          " bytes can hold");
}

// Reads up to `want` bytes into data, which grows as they arrive (to at most twice what has
// come), so that the file, not its header, decides how much memory it takes; a plain file's
// size vouches for its data (check_room), and its buffer is taken whole. Returns the bytes
// read; fewer than want only when the data ends early.
std::size_t read_growing(GzReader& in, std::vector<std::uint8_t>& data, std::size_t want) {
  constexpr std::size_t kFirst = std::size_t{1} << 20;
  const std::size_t first = in.compressed() || in.file_bytes() == 0 ? kFirst : want;
  std::size_t have = 0;
  while (have < want) {
    if (have == data.capacity()) data.reserve(std::min(want, std::max(first, 2 * have)));
    const std::size_t n = data.capacity() - have;
    data.resize(have + n);
    const std::size_t got = in.read(data.data() + have, n);
    have += got;
    if (got < n) break;
  }
  data.resize(have);
  return have;
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
  check_room(in, want, items, 4 + header.size());
  const std::size_t have = read_growing(in, out.data, want);
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
