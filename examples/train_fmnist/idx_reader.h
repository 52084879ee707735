// Reader for IDX files (the MNIST format) of unsigned bytes, gzip-compressed or plain.
// Every failure is an IdxError whose one-line message starts with the file's path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fmnist {

class IdxError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct IdxArray {
  std::vector<std::uint32_t> dims;  // dims[0] is the number of items (images, labels)
  std::vector<std::uint8_t> data;   // row-major, dims[0] * ... * dims[n-1] bytes
};

// Reads an IDX file whose element type is unsigned byte (0x08) and that has expected_ndims
// dimensions. With max_items > 0 only the first max_items items are read (and what follows is
// not checked); otherwise the whole file is read and must end exactly after the data, with an
// intact gzip trailer (CRC) when compressed. The data's buffer grows as bytes arrive, and a
// header that promises more than the file can hold fails ("truncated") before any is allocated.
IdxArray read_idx(const std::string& path, int expected_ndims, std::size_t max_items = 0);

}  // namespace fmnist
