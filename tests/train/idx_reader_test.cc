// The IDX reader on files this test writes itself (gzip-compressed with zlib, and plain):
// good ones, and truncated, corrupt, wrong-magic ones, each an error naming the file.
#include "idx_reader.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "dataset.h"
#include "temp_tree.h"

// The peak of the bytes held through operator new (where std::vector's buffers come from) while
// a test watches: what reading a file costs, measured exactly rather than through the RSS.
namespace {
std::atomic<bool> g_watching{false};
std::atomic<long long> g_live{0}, g_peak{0};

void count(void* p, long long sign) {
  if (!p || !g_watching.load(std::memory_order_relaxed)) return;
  const long long live = g_live += sign * static_cast<long long>(malloc_usable_size(p));
  long long peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
}

// Out of line, so that GCC, seeing new's memory reach free() once delete is inlined, does not
// call it a mismatch (-Wmismatched-new-delete): the replacement new below is malloc.
[[gnu::noinline]] void release(void* p) noexcept {
  count(p, -1);
  std::free(p);
}
}  // namespace

void* operator new(std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  count(p, 1);
  return p;
}
void operator delete(void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }

namespace fmnist {
namespace {

constexpr long long kSmall = 256 << 10;  // bytes: the reader's own, without the data

// The most bytes held at once (beyond those held before) while f runs.
template <class F>
long long peak_bytes(F f) {
  g_live = 0;
  g_peak = 0;
  g_watching = true;
  f();
  g_watching = false;
  return g_peak.load();
}

using Bytes = std::vector<std::uint8_t>;

Bytes idx_bytes(std::uint8_t type, const std::vector<std::uint32_t>& dims, const Bytes& data) {
  Bytes out{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      out.push_back(static_cast<std::uint8_t>(d >> shift));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes iota_bytes(std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(i * 7 + 1);
  return b;
}

// The files go in a fresh directory, root_, removed after each test.
class IdxReader : public synk::testing::TempTree {
 protected:
  std::string write_gz(const std::string& name, const Bytes& content) {
    const std::string path = root_ + "/" + name;
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(gzwrite(f, content.data(), static_cast<unsigned>(content.size())),
              static_cast<int>(content.size()));
    EXPECT_EQ(gzclose(f), Z_OK);
    return path;
  }
  std::string write_plain(const std::string& name, const Bytes& content) {
    const std::string path = root_ + "/" + name;
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(content.data()),
               static_cast<std::streamsize>(content.size()));
    return path;
  }
  Bytes read_raw(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(f), {});
  }

  // The reader's message must start with the path and contain what.
  void expect_error(const std::string& path, int ndims, const std::string& what,
                    std::size_t max_items = 0) {
    try {
      read_idx(path, ndims, max_items);
      ADD_FAILURE() << "no error for " << path;
    } catch (const IdxError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
};

TEST_F(IdxReader, ReadsGoodImagesAndLabels) {
  const Bytes pixels = iota_bytes(3 * 4 * 5);
  const auto images = read_idx(write_gz("img.gz", idx_bytes(0x08, {3, 4, 5}, pixels)), 3);
  EXPECT_EQ(images.dims, (std::vector<std::uint32_t>{3, 4, 5}));
  EXPECT_EQ(images.data, pixels);
  const auto labels = read_idx(write_gz("lab.gz", idx_bytes(0x08, {3}, {7, 0, 9})), 1);
  EXPECT_EQ(labels.data, (Bytes{7, 0, 9}));
}

TEST_F(IdxReader, ReadsPlainFilesToo) {
  const Bytes pixels = iota_bytes(2 * 2 * 2);
  EXPECT_EQ(read_idx(write_plain("img", idx_bytes(0x08, {2, 2, 2}, pixels)), 3).data, pixels);
}

TEST_F(IdxReader, LimitReadsTheFirstItems) {
  const Bytes pixels = iota_bytes(5 * 2 * 3);
  const auto images = read_idx(write_gz("img.gz", idx_bytes(0x08, {5, 2, 3}, pixels)), 3, 2);
  EXPECT_EQ(images.dims, (std::vector<std::uint32_t>{2, 2, 3}));
  EXPECT_EQ(images.data, Bytes(pixels.begin(), pixels.begin() + 12));
  EXPECT_EQ(read_idx(root_ + "/img.gz", 3, 99).dims[0], 5u);  // a limit above the count: all
}

TEST_F(IdxReader, TruncatedData) {
  Bytes content = idx_bytes(0x08, {3, 4, 5}, iota_bytes(3 * 4 * 5));
  content.resize(content.size() - 20);  // the header promises 60 bytes, 40 follow
  expect_error(write_gz("short.gz", content), 3, "truncated: 40 of 60 data bytes");
  expect_error(write_gz("header.gz", Bytes{0, 0, 8, 3, 0, 0}), 3, "truncated");
  expect_error(write_gz("empty.gz", Bytes{}), 3, "truncated");
}

// A header that promises 2^30 items of 784 bytes is a truncated file, found before any memory
// is taken for the data: a gzip file holds at most 1032 bytes per byte, a plain one its size.
// Before, the reader took 16 MiB for each of these (the data was read in 16 MiB pieces), and
// a gzip of zeros was read whole before "truncated": 1 GiB from the 1 MB file, here 8
// MiB from 8 KiB.
TEST_F(IdxReader, HugeCountInHeader) {
  const Bytes huge_small = idx_bytes(0x08, {1u << 30, 28, 28}, iota_bytes(784));
  const std::string gz = write_gz("huge.gz", huge_small);
  const std::string gz_bytes = std::to_string(read_raw(gz).size());
  EXPECT_LT(peak_bytes([&] {
              expect_error(gz, 3,
                           "truncated: 1073741824 items need 841813590016 data bytes, more than "
                           "a gzip file of " + gz_bytes + " bytes can hold");
            }),
            kSmall);
  const std::string plain = write_plain("huge", huge_small);
  EXPECT_LT(peak_bytes([&] {
              expect_error(plain, 3,
                           "truncated: 784 of 841813590016 data bytes (1073741824 items)");
            }),
            kSmall);
  const std::string zeros =
      write_gz("zeros.gz", idx_bytes(0x08, {1u << 30, 28, 28}, Bytes(std::size_t{8} << 20)));
  EXPECT_LT(peak_bytes([&] { expect_error(zeros, 3, "more than a gzip file of "); }), kSmall);
  // A limit asks for only that many items, which the file holds.
  EXPECT_EQ(read_idx(gz, 3, 1).data, iota_bytes(784));
  EXPECT_EQ(read_idx(plain, 3, 1).data, iota_bytes(784));
}

// A good file's buffer ends the size of its data; a plain file's is taken whole (its size
// vouches for it), a gzip file's doubles as the data comes, from 1 MiB.
TEST_F(IdxReader, MemoryFollowsTheData) {
  const std::size_t bytes = std::size_t{3} << 20;
  const Bytes content = idx_bytes(0x08, {3072, 32, 32}, iota_bytes(bytes));
  const std::string plain = write_plain("good", content), gz = write_gz("good.gz", content);
  IdxArray a;
  EXPECT_LT(peak_bytes([&] { a = read_idx(plain, 3); }), static_cast<long long>(bytes) + kSmall);
  EXPECT_EQ(a.data, iota_bytes(bytes));
  EXPECT_EQ(a.data.capacity(), bytes);
  EXPECT_LT(peak_bytes([&] { a = read_idx(gz, 3); }), 2 * static_cast<long long>(bytes));
  EXPECT_EQ(a.data, iota_bytes(bytes));
  EXPECT_EQ(a.data.capacity(), bytes);
}

TEST_F(IdxReader, TruncatedGzipStream) {
  const std::string good = write_gz("good.gz", idx_bytes(0x08, {50, 20, 20}, iota_bytes(50 * 400)));
  Bytes raw = read_raw(good);
  raw.resize(raw.size() / 2);
  expect_error(write_plain("cut.gz", raw), 3, "truncated");
  raw = read_raw(good);
  raw.resize(raw.size() - 4);  // only the length field of the trailer is missing
  expect_error(write_plain("trailer.gz", raw), 3, "truncated");
}

TEST_F(IdxReader, CorruptGzipStream) {
  Bytes raw = read_raw(write_gz("good.gz", idx_bytes(0x08, {50, 20, 20}, iota_bytes(50 * 400))));
  raw[raw.size() - 6] ^= 0xff;  // the CRC
  expect_error(write_plain("crc.gz", raw), 3, "corrupt gzip data");
}

TEST_F(IdxReader, WrongMagic) {
  expect_error(write_gz("magic.gz", Bytes{0x12, 0x34, 0x08, 0x03, 0, 0, 0, 1}), 3,
               "not an IDX file (magic 0x12340803)");
  expect_error(write_gz("float.gz", idx_bytes(0x0d, {1, 1, 1}, Bytes(4))), 3,
               "element type 0x00000d03 is not unsigned byte");
  expect_error(write_gz("labels.gz", idx_bytes(0x08, {3}, {1, 2, 3})), 3,
               "has 1 dimensions, expected 3");
}

TEST_F(IdxReader, TrailingBytesAndMissingFile) {
  Bytes content = idx_bytes(0x08, {2}, {1, 2});
  content.push_back(3);
  expect_error(write_gz("trail.gz", content), 1, "trailing bytes");
  expect_error(root_ + "/nothing.gz", 1, "cannot open: No such file or directory");
}

TEST_F(IdxReader, DatasetChecksCountsAndLabels) {
  write_gz("train-images-idx3-ubyte.gz", idx_bytes(0x08, {3, 28, 28}, iota_bytes(3 * 784)));
  write_gz("train-labels-idx1-ubyte.gz", idx_bytes(0x08, {3}, {1, 2, 9}));
  const Dataset ok = load_fashion_mnist(root_, "train");
  EXPECT_EQ(ok.count, 3u);
  EXPECT_EQ(ok.dim, 784u);
  RowMatrix<float> x;
  std::vector<std::uint8_t> y;
  const std::vector<std::uint32_t> idx{2, 0};
  gather_rows(ok.view(), idx, x, y);
  EXPECT_EQ(y, (std::vector<std::uint8_t>{9, 1}));
  EXPECT_FLOAT_EQ(x(0, 1),
                  static_cast<float>(static_cast<std::uint8_t>((2 * 784 + 1) * 7 + 1)) / 255.0f);

  write_gz("train-labels-idx1-ubyte.gz", idx_bytes(0x08, {2}, {1, 2}));
  EXPECT_THROW(load_fashion_mnist(root_, "train"), IdxError);
  write_gz("train-labels-idx1-ubyte.gz", idx_bytes(0x08, {3}, {1, 2, 10}));
  try {
    load_fashion_mnist(root_, "train");
    ADD_FAILURE() << "label 10 accepted";
  } catch (const IdxError& e) {
    EXPECT_NE(std::string(e.what()).find("label 10 at index 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fmnist
