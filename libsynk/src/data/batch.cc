// Batch: which rows of a dataset a call uses, and each rank's share of them; gather_rows copies
// a selection of rows out of a Data.
#include <algorithm>
#include <cstring>
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

Batch Batch::of(const RowSelection& sel) {
  if (!sel.indices.empty()) return indices(sel.indices);
  const std::size_t step = sel.step ? sel.step : 1;
  return slice(sel.start, sel.count ? sel.start + (sel.count - 1) * step + 1 : sel.start, step);
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
      s.count = b_ > a_ ? (b_ - a_ - 1) / step_ + 1 : 0;  // no b - a + step - 1: it can wrap
      break;
    case Kind::indices:
      check_indices(rows);
      s.indices = *rows_;
      break;
  }
  return s;
}

namespace detail {

void check_selection(const RowSelection& sel, std::size_t rows) {
  auto bad = [&](std::size_t row, std::size_t position) {
    return Error(ErrorCode::InvalidArgument,
                 "Data::take: row " + std::to_string(row) + " (position " +
                     std::to_string(position) + " of the selection) is out of range for data of " +
                     std::to_string(rows) + " rows");
  };
  if (!sel.indices.empty()) {
    for (std::size_t i = 0; i < sel.indices.size(); ++i) {
      if (sel.indices[i] >= rows) throw bad(sel.indices[i], i);
    }
    return;
  }
  if (sel.count == 0) return;
  if (sel.start >= rows) throw bad(sel.start, 0);
  // The last row, start + (count - 1) * step, without overflowing.
  const std::size_t room = rows - 1 - sel.start;
  if (sel.step != 0 && sel.count - 1 > room / sel.step) {
    const std::size_t first_bad = room / sel.step + 1;
    throw bad(sel.start + first_bad * sel.step, first_bad);
  }
}

}  // namespace detail

void Batch::check_indices(std::size_t rows) const {
  for (std::size_t i = 0; i < rows_->size(); ++i) {
    if ((*rows_)[i] >= rows) {
      throw Error(ErrorCode::InvalidArgument,
                  "Batch::indices: index " + std::to_string((*rows_)[i]) + " (position " +
                      std::to_string(i) + ") is out of range for data of " +
                      std::to_string(rows) + " rows");
    }
  }
}

RowSelection Batch::for_rank(std::size_t rows, int rank, int size) const {
  if (size < 1 || rank < 0 || rank >= size) {
    throw Error(ErrorCode::InvalidArgument, "Batch::for_rank: rank " + std::to_string(rank) +
                                                " of " + std::to_string(size) + " ranks");
  }
  const auto bounds = [&](std::size_t len, std::size_t* lo, std::size_t* hi) {
    *lo = len * static_cast<std::size_t>(rank) / static_cast<std::size_t>(size);
    *hi = len * static_cast<std::size_t>(rank + 1) / static_cast<std::size_t>(size);
  };
  std::size_t lo = 0, hi = 0;
  RowSelection mine;
  if (kind_ == Kind::indices) {
    // Every rank checks the whole list (so all ranks fail alike), but copies only its share:
    // this runs once per batch per Data input, in the training loop.
    check_indices(rows);
    bounds(rows_->size(), &lo, &hi);
    mine.indices.assign(rows_->begin() + static_cast<std::ptrdiff_t>(lo),
                        rows_->begin() + static_cast<std::ptrdiff_t>(hi));
    return mine;
  }
  const RowSelection all = select(rows);
  bounds(all.size(), &lo, &hi);
  mine.start = all.start + lo * all.step;
  mine.step = all.step;
  mine.count = hi - lo;
  return mine;
}

namespace detail {

namespace {
constexpr std::size_t kLine = 64;
// Rows whose first line is requested before their turn. With 4 KiB pages (the segment is tmpfs;
// THP for shmem is often off) nearly every random row starts with a TLB miss, and a page walk
// under a hypervisor is slow; requesting the first lines early overlaps those walks, which
// the hardware prefetchers cannot do for scattered rows. Measured (2 ranks, 128 rows of 3136
// bytes out of 188 MB, synk-bench-synkhronos's case): without it the copy ran at 0.4-0.5 of a
// contiguous memcpy's speed, with it 0.6-0.8. With 2 MiB pages (MADV_COLLAPSE works on tmpfs
// even with THP off, at ~0.7 s per 188 MB) the copy without it was faster, with it no faster:
// the early requests already hide the walks, so the segment keeps its 4 KiB pages.
constexpr std::size_t kTouchRows = 256;
// Lines requested ahead of the one being copied, one more per line copied: about 8 KiB in
// flight covers the memory latency. A larger burst is worse, not better: prefetches beyond the
// core's miss buffers are dropped (measured: requesting every line of the batch first, then
// copying, is as slow as no prefetch at all), so the requests are spread line by line through
// the copy rather than issued a row at a time.
constexpr std::size_t kLinesAhead = 128;
}  // namespace

void gather_rows(const unsigned char* base, std::size_t row_bytes, const RowSelection& sel,
                 unsigned char* out) {
  const std::size_t n = sel.size();
  if (n == 0 || row_bytes == 0) return;
  const std::size_t full = row_bytes / kLine, tail = row_bytes % kLine;

  std::size_t touched = 0;  // rows whose first line was requested
  const auto touch = [&] {
    if (touched < n) __builtin_prefetch(base + sel[touched++] * row_bytes);
  };
  // The prefetch cursor: row pr, position pl in [1, full + 1] at byte min(pl * 64, last byte),
  // so the row's last line is covered however the row sits across lines (position 0 is the
  // first line, requested by touch()).
  std::size_t pr = 0, pl = 1;
  const auto ahead = [&] {
    if (pr >= n) return;
    __builtin_prefetch(base + sel[pr] * row_bytes + std::min(pl * kLine, row_bytes - 1));
    if (++pl > full + 1) {
      pl = 1;
      ++pr;
    }
  };

  for (std::size_t k = 0; k < kTouchRows; ++k) touch();
  for (std::size_t k = 0; k < kLinesAhead; ++k) ahead();
  for (std::size_t i = 0; i < n; ++i) {
    touch();
    const unsigned char* src = base + sel[i] * row_bytes;
    for (std::size_t c = 0; c < full; ++c, out += kLine, src += kLine) {
      ahead();
      std::memcpy(out, src, kLine);  // constant size: a few vector moves, no call
    }
    if (tail) {
      std::memcpy(out, src, tail);
      out += tail;
    }
    ahead();  // the row's last position, so the cursor keeps its lead
  }
}

}  // namespace detail

}  // namespace synk
