// Communicator::alloc (synk/node_buffer.h) under mpiexec: node buffers on the backend the test
// runs with (shm on one node, hier with SYNK_SIMULATE_NODES) and on the mpi backend, where they
// are ordinary memory. Collectives on them are checked element by element; sizes that differ
// between the ranks are an error on every rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "mpi_test.h"

namespace {

using synk::DataType;
using synk::ReduceOp;
using ::testing::HasSubstr;

std::int32_t value(int r, std::size_t i) {
  return static_cast<std::int32_t>((r + 1) * 7 + static_cast<std::int64_t>(i % 89));
}

// all_gather out of place and in place, broadcast from every root and all_reduce in place, with
// every buffer in node buffers, `count` int32 per rank.
void check_collectives(synk::Communicator& comm, std::size_t count) {
  const int n = comm.size(), me = comm.rank();
  const std::size_t un = static_cast<std::size_t>(n);
  synk::NodeBuffer send = comm.alloc(count * sizeof(std::int32_t));
  synk::NodeBuffer recv = comm.alloc(un * count * sizeof(std::int32_t));
  ASSERT_EQ(send.size(), count * sizeof(std::int32_t));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(send.data()) % 4096, 0u) << "a part starts a page";
  auto s = send.as<std::int32_t>();
  auto r = recv.as<std::int32_t>();
  ASSERT_EQ(r.size(), un * count);
  const std::string at = " (" + comm.backend() + ", count " + std::to_string(count) + ")";

  for (std::size_t i = 0; i < count; ++i) s[i] = value(me, i);
  comm.all_gather(s.data(), r.data(), count, DataType::int32);
  for (int q = 0; q < n; ++q) {
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_EQ(r[static_cast<std::size_t>(q) * count + i], value(q, i))
          << "all_gather" << at << ": rank " << q << "'s element " << i;
    }
  }

  std::fill(r.begin(), r.end(), -1);
  for (std::size_t i = 0; i < count; ++i)
    r[static_cast<std::size_t>(me) * count + i] = value(me, i);
  comm.all_gather(r.data() + static_cast<std::size_t>(me) * count, r.data(), count,
                  DataType::int32);
  for (int q = 0; q < n; ++q) {
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_EQ(r[static_cast<std::size_t>(q) * count + i], value(q, i))
          << "all_gather in place" << at << ": rank " << q << "'s element " << i;
    }
  }

  for (int root = 0; root < n; ++root) {
    for (std::size_t i = 0; i < count; ++i) s[i] = me == root ? value(root, i) : -1;
    comm.broadcast(s.data(), count, DataType::int32, root);
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_EQ(s[i], value(root, i)) << "broadcast from " << root << at << ": element " << i;
    }
  }

  for (std::size_t i = 0; i < count; ++i) s[i] = value(me, i);
  comm.all_reduce(s.data(), s.data(), count, DataType::int32, ReduceOp::sum);
  for (std::size_t i = 0; i < count; ++i) {
    std::int32_t want = 0;
    for (int q = 0; q < n; ++q) want += value(q, i);
    ASSERT_EQ(s[i], want) << "all_reduce in place" << at << ": element " << i;
  }
}

// 300001 int32 (1.2 MB) take two steps of the shm backend's 1 MiB slots.
const std::size_t kCounts[] = {1, 4097, 300001};

TEST(NodeBuffer, CollectivesOnNodeBuffersAreExact) {
  for (std::size_t count : kCounts) check_collectives(synk_test::world(), count);
}

TEST(NodeBuffer, OnTheMpiBackendTheyAreOrdinaryMemoryAndExact) {
  synk::Communicator m(synk::CommOptions{"mpi"});
  for (std::size_t count : kCounts) check_collectives(m, count);
}

TEST(NodeBuffer, ZeroBytesIsAnEmptyBuffer) {
  synk::NodeBuffer b = synk_test::world().alloc(0);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.data(), nullptr);
}

TEST(NodeBuffer, DifferentSizesOnTheRanksAreAnErrorOnEveryRank) {
  synk::Communicator& comm = synk_test::world();
  if (comm.size() < 2) GTEST_SKIP() << "needs two ranks";
  try {
    comm.alloc(comm.rank() == 0 ? 4096 : 8192);
    ADD_FAILURE() << "rank " << comm.rank() << ": no error";
  } catch (const synk::Error& e) {
    EXPECT_EQ(e.code(), synk::ErrorCode::InvalidUsage);
    EXPECT_THAT(e.what(), HasSubstr("different sizes"));
    EXPECT_THAT(e.what(), HasSubstr("the largest 8192, the smallest 4096"));
  }
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// 1 TiB: more than /dev/shm (or memory) holds. An error on every rank and backend when it is
// asked for, not a SIGBUS (shm) or the kernel's OOM killer (where it overcommits) later.
TEST(NodeBuffer, MoreThanTheMachineHoldsIsAnErrorOnEveryRank) {
  synk::Communicator& comm = synk_test::world();
  try {
    synk::NodeBuffer b = comm.alloc(std::size_t{1} << 40);
    ADD_FAILURE() << "rank " << comm.rank() << ": no error";
  } catch (const synk::Error& e) {
    EXPECT_EQ(e.code(), synk::ErrorCode::System) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("cannot reserve")) << e.what();
  }
  EXPECT_TRUE(synk_test::still_usable(comm));
}

std::size_t mapped_regions() {
  std::ifstream maps("/proc/self/maps");
  std::size_t n = 0;
  for (std::string line; std::getline(maps, line);) ++n;
  return n;
}

// A buffer allocated and dropped per step: the next alloc unmaps the ones every rank has
// dropped, so that /dev/shm (which no process's RSS shows) and the mappings do not grow.
TEST(NodeBuffer, DroppedOnEveryRankTheyAreUnmappedAtTheNextAlloc) {
  synk::Communicator& comm = synk_test::world();
  const std::size_t before = mapped_regions();
  for (int step = 0; step < 100; ++step) {
    synk::NodeBuffer b = comm.alloc(std::size_t{1} << 20);
    b.as<unsigned char>()[0] = 1;
  }
  EXPECT_LE(mapped_regions(), before + 4) << "on " << comm.backend();
}

// Rank 0 drops a buffer the others still hold; an alloc after it must not unmap it there: a
// peer's part offered in place is read through rank 0's own mapping.
TEST(NodeBuffer, ABufferAnotherRankStillHoldsStaysReadable) {
  synk::Communicator& comm = synk_test::world();
  if (comm.size() < 2) GTEST_SKIP() << "needs two ranks";
  const std::size_t count = 300001;
  synk::NodeBuffer kept = comm.alloc(count * sizeof(std::int32_t));
  std::vector<std::int32_t> plain(count);
  for (std::size_t i = 0; i < count; ++i) plain[i] = value(comm.rank(), i);
  if (comm.rank() == 0) {
    kept = synk::NodeBuffer();
  } else {
    std::memcpy(kept.data(), plain.data(), kept.size());
  }
  synk::NodeBuffer next = comm.alloc(4096);
  const auto* send = comm.rank() == 0 ? plain.data() : kept.as<std::int32_t>().data();
  std::vector<std::int32_t> all(count * static_cast<std::size_t>(comm.size()), -1);
  comm.all_gather(send, all.data(), count, DataType::int32);
  for (int q = 0; q < comm.size(); ++q) {
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_EQ(all[static_cast<std::size_t>(q) * count + i], value(q, i))
          << "rank " << q << "'s element " << i;
    }
  }
}

TEST(NodeBuffer, OutlivesItsCommunicator) {
  synk::NodeBuffer b;
  {
    synk::Communicator c(MPI_COMM_WORLD);
    b = c.alloc(3 * 4096 + 5);
  }
  std::memset(b.data(), 0x5a, b.size());
  const auto bytes = b.as<unsigned char>();
  EXPECT_EQ(bytes[0], 0x5a);
  EXPECT_EQ(bytes[bytes.size() - 1], 0x5a);
}

}  // namespace
