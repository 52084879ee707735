// Node-shared Data and Batch under mpiexec: values reach every rank (and every simulated node),
// loaders run once per node, views are zero-copy, splits are linspace-even, errors are clear.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../multirank/mpi_test.h"
#include "synk/data.h"

namespace synk {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using synk_test::caught;
using synk_test::message;
using synk_test::still_usable;
using synk_test::world;

TEST(Batch, SelectionsAndErrors) {
  EXPECT_EQ(Batch::all().select(7).size(), 7u);
  EXPECT_EQ(Batch::first(3).select(7).size(), 3u);
  const RowSelection s = Batch::slice(1, 8, 3).select(10);  // 1, 4, 7
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], 1u);
  EXPECT_EQ(s[2], 7u);
  EXPECT_FALSE(s.contiguous());
  EXPECT_TRUE(Batch::slice(2, 5).select(10).contiguous());
  EXPECT_EQ(Batch::slice(5, 2).select(10).size(), 0u);
  EXPECT_EQ(Batch::slice(0, 5, SIZE_MAX).select(10).size(), 1u);  // row 0 (the count wrapped)
  EXPECT_EQ(Batch::slice(2, 3, 7).select(10).size(), 1u);
  EXPECT_THROW(Batch::first(8).select(7), Error);
  EXPECT_THROW(Batch::slice(0, 11).select(10), Error);
  EXPECT_THROW(Batch::slice(0, 5, 0), Error);
  try {
    Batch::indices({3, 12, 1}).select(10);
    ADD_FAILURE() << "out-of-range index accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("index 12 (position 1) is out of range for data of 10 rows"));
  }
}

TEST(Batch, LinspaceSplitIsEvenAndCoversEverything) {
  // 5 positions over 2 ranks: 2 and 3; over 3 ranks: 1, 2, 2; over 4: 1, 1, 1, 2.
  const std::vector<std::vector<std::size_t>> expected = {{5}, {2, 3}, {1, 2, 2}, {1, 1, 1, 2}};
  for (int n = 1; n <= 4; ++n) {
    std::size_t next = 0;
    for (int r = 0; r < n; ++r) {
      const RowSelection s = Batch::first(5).for_rank(10, r, n);
      EXPECT_EQ(s.size(), expected[static_cast<std::size_t>(n - 1)][static_cast<std::size_t>(r)]);
      for (std::size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i], next++);
    }
    EXPECT_EQ(next, 5u);
  }
  const RowSelection picked = Batch::indices({9, 0, 4, 4, 2}).for_rank(10, 1, 2);
  EXPECT_EQ(picked.indices, (std::vector<std::size_t>{4, 4, 2}));
  const RowSelection strided = Batch::slice(0, 10, 2).for_rank(10, 1, 2);  // 0 2 | 4 6 8
  EXPECT_EQ(strided.size(), 3u);
  EXPECT_EQ(strided[0], 4u);
}

// gather_rows requests lines well ahead of its copy; whatever the row size and alignment, it
// must copy exactly the selected rows, in order, and not a byte more.
TEST(Batch, GatherRowsCopiesExactlyTheSelectedRows) {
  std::mt19937 rng(11);
  constexpr std::size_t kRows = 700;
  for (const std::size_t row_bytes : {1, 7, 63, 64, 65, 3136, 5000}) {
    std::vector<unsigned char> src(kRows * row_bytes + 3);
    for (std::size_t i = 0; i < src.size(); ++i) {
      src[i] = static_cast<unsigned char>(i * 131 + i / 251);
    }
    const unsigned char* base = src.data() + 3;  // rows off any line alignment
    std::vector<std::size_t> idx(300);           // more rows than gather_rows touches ahead
    for (std::size_t& i : idx) i = rng() % kRows;
    idx[1] = idx[0];  // a repeated row
    for (const RowSelection& sel :
         {RowSelection{0, 0, 1, idx}, Batch::slice(5, 650, 3).select(kRows), RowSelection{}}) {
      std::vector<unsigned char> out(sel.size() * row_bytes + 1, 0xA5);
      detail::gather_rows(base, row_bytes, sel, out.data());
      for (std::size_t i = 0; i < sel.size(); ++i) {
        for (std::size_t b = 0; b < row_bytes; ++b) {
          ASSERT_EQ(out[i * row_bytes + b], base[sel[i] * row_bytes + b])
              << "row_bytes " << row_bytes << ", row " << i << " (index " << sel[i] << "), byte "
              << b;
        }
      }
      EXPECT_EQ(out.back(), 0xA5) << "wrote past the end, row_bytes " << row_bytes;
    }
  }
}

TEST(Data, MasterValuesReachEveryRankOncePerNode) {
  Communicator& comm = world();
  Data<float> d(comm, {10, 3});
  // Anonymous (a memfd the local ranks open through local rank 0's descriptor): never in
  // /dev/shm, so no crash at any moment can leave it there.
  ASSERT_THAT(d.segment_name(), StartsWith("memfd:synk-"));
  EXPECT_NE(access(("/dev/shm/" + d.segment_name().substr(6)).c_str(), F_OK), 0)
      << d.segment_name();
  std::vector<float> values;
  if (comm.rank() == 0) {
    values.resize(30);
    std::iota(values.begin(), values.end(), 0.5f);
  }
  d.set_value(values);
  ASSERT_EQ(d.rows(), 10u);
  ASSERT_EQ(d.row_elems(), 3u);
  for (std::size_t i = 0; i < 30; ++i) ASSERT_EQ(d.data()[i], static_cast<float>(i) + 0.5f) << i;

  // Each rank's share of the first 7 rows: contiguous, so a view into shared memory.
  const BatchRows<float> mine = d.take(Batch::first(7), comm.rank(), comm.size());
  EXPECT_TRUE(mine.owned.empty());
  const RowSelection sel = Batch::first(7).for_rank(10, comm.rank(), comm.size());
  ASSERT_EQ(mine.rows, sel.size());
  if (mine.rows) {
    EXPECT_EQ(mine.values.data(), d.data() + sel[0] * 3);
  }
  // An index list is copied, row by row.
  const BatchRows<float> picked = d.take(RowSelection{0, 0, 1, {9, 2}});
  ASSERT_EQ(picked.values.size(), 6u);
  EXPECT_EQ(picked.values[0], 27.5f);
  EXPECT_EQ(picked.values[3], 6.5f);
  // A copy of copied rows views its own copy: the original may be gone when it is read (it
  // viewed the original's buffer, read after free).
  std::vector<BatchRows<float>> kept;
  {
    BatchRows<float> temporary = d.take(RowSelection{0, 0, 1, {9, 2}});
    kept.push_back(temporary);
    BatchRows<float> assigned;
    assigned = temporary;
    kept.push_back(assigned);
  }
  for (const BatchRows<float>& k : kept) {
    EXPECT_EQ(k.values.data(), k.owned.data());
    ASSERT_EQ(k.values.size(), 6u);
    EXPECT_EQ(k.values[0], 27.5f);
    EXPECT_EQ(k.values[5], 8.5f);
  }
  const BatchRows<float> view_copy = mine;  // a view into shared memory stays one
  EXPECT_EQ(view_copy.values.data(), mine.values.data());

  // A hand-made selection out of range is an error naming the row (it read past the segment:
  // SIGSEGV for row 1000000, another mapping's bytes for rows 8-12 of 10).
  auto take_error = [&](const RowSelection& s) {
    try {
      (void)d.take(s);
    } catch (const synk::Error& e) {
      EXPECT_EQ(e.code(), synk::ErrorCode::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(take_error(RowSelection{0, 0, 1, {1, 1000000}}),
              HasSubstr("row 1000000 (position 1 of the selection) is out of range for data of "
                        "10 rows"));
  EXPECT_THAT(take_error(RowSelection{8, 5, 1, {}}), HasSubstr("row 10 (position 2"));
  EXPECT_THAT(take_error(RowSelection{1, 4, 3, {}}), HasSubstr("row 10 (position 3"));
  EXPECT_THAT(take_error(RowSelection{10, 1, 1, {}}), HasSubstr("row 10 (position 0"));
  EXPECT_THAT(take_error(RowSelection{0, 2, ~std::size_t{0} / 2, {}}), HasSubstr("out of range"));
  EXPECT_EQ(d.take(RowSelection{1, 3, 4, {}}).rows, 3u);  // rows 1, 5, 9: the last one fits
  EXPECT_EQ(d.take(RowSelection{10, 0, 1, {}}).rows, 0u);  // nothing taken, nothing read
}

TEST(Data, SetValueWithTheWrongSizeFailsOnEveryRank) {
  Communicator& comm = world();
  Data<std::int32_t> d(comm, {4, 2});
  std::vector<std::int32_t> short_values(comm.rank() == 0 ? 7 : 0);
  const auto e = caught([&] { d.set_value(short_values); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e), HasSubstr("rank 0 passed 7 elements, the data holds 8"));
  EXPECT_TRUE(still_usable(comm));
}

TEST(Data, LoaderRunsOncePerNode) {
  Communicator& comm = world();
  Data<double> d(comm, {5});
  int ran = 0;
  d.load([&](double* p) {
    ++ran;
    for (int i = 0; i < 5; ++i) p[i] = i * 2.0;
  });
  int total = 0;
  MPI_Allreduce(&ran, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(total, comm.num_nodes());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(d.data()[i], i * 2.0);
}

TEST(Data, LoaderFailureReachesEveryRank) {
  Communicator& comm = world();
  Data<double> d(comm, {5});
  const bool fails_here = comm.node() == comm.num_nodes() - 1 && comm.local_rank() == 0;
  const auto e = caught([&] {
    d.load([&](double*) {
      if (comm.node() == comm.num_nodes() - 1) throw std::runtime_error("bad file");
    });
  });
  EXPECT_SYNK_ERROR(e, fails_here ? ErrorCode::System : ErrorCode::Remote);
  // Every rank names the node whose loader failed (with its host, where the ranks span nodes),
  // and its reason (the others named their own node, without the reason).
  int failing_rank = 0, mine = fails_here ? comm.rank() : comm.size();
  MPI_Allreduce(&mine, &failing_rank, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  std::array<char, 60> host{};
  if (fails_here) gethostname(host.data(), host.size() - 1);
  MPI_Bcast(host.data(), static_cast<int>(host.size()), MPI_CHAR, failing_rank, MPI_COMM_WORLD);
  const std::string node = std::to_string(comm.num_nodes() - 1) +
                           (comm.num_nodes() > 1 ? " on " + std::string(host.data()) : "");
  EXPECT_THAT(message(e), HasSubstr(fails_here ? "the loader on rank " + std::to_string(comm.rank()) +
                                                   " (node " + node + "): bad file"
                                               : "the loader: failed on rank " +
                                                     std::to_string(failing_rank) + " (node " +
                                                     node + "): bad file"));
  EXPECT_TRUE(still_usable(comm));
}

// No rank of a node may still be reading the rows (through a view from take) when set_value
// or load overwrites them: rank 0 wrote at once, while the others still read the old rows.
TEST(Data, SetValueAndLoadWaitForTheNodeBeforeOverwriting) {
  Communicator& comm = world();
  Data<int> d(comm, {4});
  d.set_value(comm.rank() == 0 ? std::vector<int>{1, 2, 3, 4} : std::vector<int>{});
  const BatchRows<int> view = d.take(Batch::all(), 0, 1);
  ASSERT_EQ(view.values.data(), d.data());
  auto read_slowly = [&](std::vector<int> expected) {
    if (comm.local_rank() == 0) return;  // the writers go straight on
    usleep(200 * 1000);
    EXPECT_EQ(std::vector<int>(view.values.begin(), view.values.end()), expected)
        << "the rows changed while this rank still read them";
  };
  read_slowly({1, 2, 3, 4});
  d.set_value(comm.rank() == 0 ? std::vector<int>{5, 6, 7, 8} : std::vector<int>{});
  EXPECT_EQ(std::vector<int>(view.values.begin(), view.values.end()), (std::vector<int>{5, 6, 7, 8}));
  read_slowly({5, 6, 7, 8});
  d.load([](int* p) { std::iota(p, p + 4, 9); });
  EXPECT_EQ(std::vector<int>(view.values.begin(), view.values.end()),
            (std::vector<int>{9, 10, 11, 12}));
}

// A segment the node cannot create: every rank of the node says why (the others' message
// ended in ": " with no reason).
TEST(Data, ASegmentTooLargeToCreateIsAnErrorWithItsReasonOnEveryRank) {
  Communicator& comm = world();
  const auto e = caught([&] { Data<float> d(comm, {std::size_t{1} << 50, 1}); });
  EXPECT_SYNK_ERROR(e, ErrorCode::System);
  const std::string text = message(e);
  EXPECT_THAT(text, HasSubstr("Data: shared segment of 4503599627370496 bytes: "));
  EXPECT_GT(text.size(), std::string("synk System: Data: shared segment of 4503599627370496 "
                                     "bytes: on local rank 0: ").size())
      << "no reason: " << text;
  if (comm.local_rank() != 0) {
    EXPECT_THAT(text, HasSubstr("on local rank 0: "));
  }
  // Rows times the element size past 2^64: refused (it wrapped to a 1-byte segment).
  const auto big = caught([&] { Data<float> d(comm, {std::size_t{1} << 62, 1}); });
  EXPECT_SYNK_ERROR(big, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(big), HasSubstr("overflow the size"));
  EXPECT_TRUE(still_usable(comm));
}

// Arguments that differ by rank: the ranks made segments of different sizes (on one node an
// error that "the segment is not the one this job made"; across nodes, a wait for the others
// in a broadcast), or kept different row counts. Now an error on every rank naming both.
TEST(Data, ShapesOrRowsThatDifferByRankAreAnErrorOnEveryRank) {
  Communicator& comm = world();
  const int n = comm.size();
  if (n < 2) GTEST_SKIP() << "needs ranks that differ";
  const bool odd = comm.rank() == n - 1;
  const auto e = caught([&] { Data<float> d(comm, {odd ? std::size_t{5} : 4, 2}, odd ? 0.5 : 1.0); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e), HasSubstr("Data: every rank must pass the same; rank 0 passed shape [4, 2] "
                                    "of 4-byte elements, oversize 1, rank " +
                                    std::to_string(n - 1) +
                                    " passed shape [5, 2] of 4-byte elements, oversize 0.5"));
  // A long shape whose description passes the 255 bytes that travel: still compared whole.
  std::vector<std::size_t> long_shape(90, 1);
  long_shape[0] = 3;
  const auto long_one = caught([&] { Data<float> l(comm, long_shape, odd ? 2.0 : 1.0); });
  EXPECT_SYNK_ERROR(long_one, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(long_one), HasSubstr("every rank must pass the same"));
  Data<float> d(comm, {4, 2}, 2.0);
  const auto r = caught([&] { d.resize(odd ? 7 : 6); });  // within the oversize: no new segment
  EXPECT_SYNK_ERROR(r, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(r), HasSubstr("Data::resize: every rank must pass the same; rank 0 passed 6 "
                                    "rows, oversize 1, rank " + std::to_string(n - 1) +
                                    " passed 7 rows, oversize 1"));
  EXPECT_EQ(d.rows(), 4u);
  EXPECT_TRUE(still_usable(comm));
}

TEST(Data, ResizeKeepsContentsWithinAndBeyondTheOversize) {
  Communicator& comm = world();
  Data<std::uint8_t> d(comm, {4, 2}, 1.5);  // room for 6 rows
  std::vector<std::uint8_t> v;
  if (comm.rank() == 0) v = {1, 2, 3, 4, 5, 6, 7, 8};
  d.set_value(v);
  const std::uint8_t* before = d.data();
  d.resize(6);  // within the oversize: same memory
  EXPECT_EQ(d.data(), before);
  EXPECT_EQ(d.rows(), 6u);
  d.resize(20, 2.0);  // beyond: new segment, contents kept
  EXPECT_EQ(d.rows(), 20u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(d.data()[i], i + 1);
  EXPECT_THROW(d.resize(30, 2.5), Error);
  EXPECT_THROW(Data<float>(comm, {3}, 0.5), Error);
  // A resize that fails leaves the data as it was (the old segment was freed first: rows()
  // still said 20 over a null data()). Too large to create, and past a size_t with the
  // oversize (a double's conversion, undefined behaviour before).
  const auto too_large = caught([&] { d.resize(std::size_t{1} << 61, 1.0); });
  EXPECT_SYNK_ERROR(too_large, ErrorCode::System);
  const auto overflow = caught([&] { d.resize(~std::size_t{0} / 2 + 2, 2.0); });
  EXPECT_SYNK_ERROR(overflow, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(overflow), HasSubstr("overflow the size"));
  EXPECT_EQ(d.rows(), 20u);
  ASSERT_NE(d.data(), nullptr);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(d.data()[i], i + 1);
  d.resize(24);  // and it still grows
  for (int i = 0; i < 8; ++i) EXPECT_EQ(d.data()[i], i + 1);
  // Rows that come back within the capacity are zeros, as new rows past it are (they showed
  // the rows from before the shrink).
  d.resize(1);
  d.resize(4);
  EXPECT_EQ(d.data()[1], 2);
  for (int i = 2; i < 8; ++i) EXPECT_EQ(d.data()[i], 0) << "element " << i;
  d.free();
  EXPECT_EQ(d.rows(), 0u);
}

// A view that take() gave keeps the node's segment: after a resize that moves the data, or a
// free(), it still reads the rows it had (it read unmapped memory, a segfault, before).
TEST(Data, ATakenViewOutlivesAResizeAndAFree) {
  Communicator& comm = world();
  Data<float> d(comm, {4, 2});
  std::vector<float> v;
  if (comm.rank() == 0) v = {1, 2, 3, 4, 5, 6, 7, 8};
  d.set_value(v);
  const BatchRows<float> before_grow = d.take(Batch::all(), 0, 1);  // every row, in place
  ASSERT_EQ(before_grow.values.data(), d.data());                    // a view, not a copy
  d.resize(40);  // past the capacity: a new segment
  const BatchRows<float> before_free = d.take(Batch::first(2), 0, 1);
  d.free();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(before_grow.values[static_cast<std::size_t>(i)], i + 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(before_free.values[static_cast<std::size_t>(i)], i + 1);
  const BatchRows<float> copy = before_grow;  // a copy holds the segment too
  EXPECT_EQ(copy.values[7], 8.0f);
}

}  // namespace
}  // namespace synk
