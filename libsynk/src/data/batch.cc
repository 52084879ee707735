// Batch: which rows of a dataset a call uses, and each rank's share of them.
#include <string>

#include "synk/data.h"
#include "synk/error.h"

namespace synk {

Batch Batch::all() { return Batch(); }

Batch Batch::first(std::size_t n) {
  Batch b;
  b.kind_ = Kind::first;
  b.a_ = n;
  return b;
}

Batch Batch::slice(std::size_t start, std::size_t stop, std::size_t step) {
  if (step == 0) throw Error(ErrorCode::InvalidArgument, "Batch::slice: step must be at least 1");
  Batch b;
  b.kind_ = Kind::slice;
  b.a_ = start;
  b.b_ = stop;
  b.step_ = step;
  return b;
}

Batch Batch::indices(std::vector<std::size_t> rows) {
  Batch b;
  b.kind_ = Kind::indices;
  b.rows_ = std::make_shared<const std::vector<std::size_t>>(std::move(rows));
  return b;
}

RowSelection Batch::select(std::size_t rows) const {
  RowSelection s;
  switch (kind_) {
    case Kind::all:
      s.count = rows;
      break;
    case Kind::first:
      if (a_ > rows) {
        throw Error(ErrorCode::InvalidArgument, "Batch::first(" + std::to_string(a_) +
                                                    "): the data has only " +
                                                    std::to_string(rows) + " rows");
      }
      s.count = a_;
      break;
    case Kind::slice:
      if (a_ > rows || b_ > rows) {
        throw Error(ErrorCode::InvalidArgument,
                    "Batch::slice(" + std::to_string(a_) + ", " + std::to_string(b_) +
                        "): out of range for data of " + std::to_string(rows) + " rows");
      }
      s.start = a_;
      s.step = step_;
      s.count = b_ > a_ ? (b_ - a_ + step_ - 1) / step_ : 0;
      break;
    case Kind::indices:
      for (std::size_t i = 0; i < rows_->size(); ++i) {
        if ((*rows_)[i] >= rows) {
          throw Error(ErrorCode::InvalidArgument,
                      "Batch::indices: index " + std::to_string((*rows_)[i]) + " (position " +
                          std::to_string(i) + ") is out of range for data of " +
                          std::to_string(rows) + " rows");
        }
      }
      s.indices = *rows_;
      break;
  }
  return s;
}

RowSelection Batch::for_rank(std::size_t rows, int rank, int size) const {
  if (size < 1 || rank < 0 || rank >= size) {
    throw Error(ErrorCode::InvalidArgument, "Batch::for_rank: rank " + std::to_string(rank) +
                                                " of " + std::to_string(size) + " ranks");
  }
  const RowSelection all = select(rows);
  const std::size_t len = all.size();
  const std::size_t lo = len * static_cast<std::size_t>(rank) / static_cast<std::size_t>(size);
  const std::size_t hi = len * static_cast<std::size_t>(rank + 1) / static_cast<std::size_t>(size);
  RowSelection mine;
  if (!all.indices.empty()) {
    mine.indices.assign(all.indices.begin() + static_cast<std::ptrdiff_t>(lo),
                        all.indices.begin() + static_cast<std::ptrdiff_t>(hi));
    return mine;
  }
  mine.start = all.start + lo * all.step;
  mine.step = all.step;
  mine.count = hi - lo;
  return mine;
}

}  // namespace synk
