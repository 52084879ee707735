// The NCCL backend on device buffers: every collective x dtype x op x count x in place or not x
// root, with the exact small-integer patterns of tests/multirank, staged to the device with guard
// elements around each buffer and checked element by element after copying back. Skips with the
// CUDA runtime's reason where no device is visible; run under mpiexec -np 2 on a GPU node.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <memory>
#include <optional>
#include <cstdlib>
#include <string>
#include <vector>

#include "grid.h"
#include "mpi_test.h"
#include "nccl_test_comm.h"
#include "synk/device.h"

namespace {

using synk::DataType;
using synk::ReduceOp;
using synk_test::Buffer;
using synk_test::data;
using synk_test::kAllTypes;
using synk_test::kSentinel;
using synk_test::Root;
using synk_test::root_of;

// Why the tests cannot run here, or nothing when a device is visible.
const std::optional<std::string>& no_device() {
  static const std::optional<std::string> why = []() -> std::optional<std::string> {
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
      cudaGetLastError();
      return std::string("no CUDA device visible: ") + cudaGetErrorString(rc);
    }
    if (count == 0) return std::string("no CUDA device visible: cudaGetDeviceCount found 0");
    return std::nullopt;
  }();
  return why;
}

using synk::testing::nccl;

// A device copy of a host Buffer, guards included, so that device writes out of bounds show.
class Device {
 public:
  explicit Device(const Buffer& host, DataType t)
      : es_(synk::size_of(t)), bytes_((host.size() + 2 * Buffer::kGuardElems) * es_) {
    EXPECT_EQ(cudaMalloc(&base_, bytes_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(base_, raw(host), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Device() { cudaFree(base_); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  void* at(std::size_t i) {
    return static_cast<unsigned char*>(base_) + (Buffer::kGuardElems + i) * es_;
  }
  void* data() { return at(0); }
  void copy_to(Buffer& host) {
    EXPECT_EQ(cudaMemcpy(raw(host), base_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
  }

 private:
  void* raw(const Buffer& host) const {
    return static_cast<unsigned char*>(const_cast<void*>(host.data())) - Buffer::kGuardElems * es_;
  }
  std::size_t es_, bytes_;
  void* base_ = nullptr;
};

enum class Coll {
  all_reduce,
  reduce,
  reduce_scatter,
  broadcast,
  all_gather,
  gather,
  gatherv,
  scatter,
  scatterv,
  all_to_all,
  all_to_allv
};
constexpr const char* kCollNames[] = {"all_reduce", "reduce",  "reduce_scatter", "broadcast",
                                      "all_gather", "gather",  "gatherv",        "scatter",
                                      "scatterv",   "all_to_all", "all_to_allv"};
constexpr ReduceOp kAllOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                ReduceOp::avg};
constexpr std::size_t kCounts[] = {0, 1, 7, 4097};

struct Case {
  Coll coll;
  DataType dtype;
  ReduceOp op;
  std::size_t count;
  bool in_place;
  Root root;
};

bool is_reduction(Coll c) {
  return c == Coll::all_reduce || c == Coll::reduce || c == Coll::reduce_scatter;
}
bool has_root(Coll c) {
  return c == Coll::reduce || c == Coll::broadcast || c == Coll::gather || c == Coll::gatherv ||
         c == Coll::scatter || c == Coll::scatterv;
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (int ci = 0; ci <= static_cast<int>(Coll::all_to_allv); ++ci) {
    const Coll c = static_cast<Coll>(ci);
    for (DataType t : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        if (!is_reduction(c) && op != ReduceOp::sum) continue;
        if (op == ReduceOp::avg && !synk::is_floating(t)) continue;
        // NCCL has no 16-bit integers to reduce (NcclComm.Int16ReductionsAreRefused).
        if (is_reduction(c) && (t == DataType::int16 || t == DataType::uint16)) continue;
        for (std::size_t n : kCounts) {
          for (bool in_place : {false, true}) {
            // broadcast has one buffer, all_to_all no in place
            const bool one_buffer = c == Coll::broadcast;
            if ((one_buffer || c == Coll::all_to_all || c == Coll::all_to_allv) && in_place) {
              continue;
            }
            for (Root r : {Root::first, Root::last}) {
              if (!has_root(c) && r == Root::last) continue;
              out.push_back(Case{c, t, op, n, in_place, r});
            }
          }
        }
      }
    }
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string s = kCollNames[static_cast<int>(c.coll)];
  s += std::string("_") + synk::to_string(c.dtype);
  if (is_reduction(c.coll)) s += std::string("_") + synk::to_string(c.op);
  s += "_n" + std::to_string(c.count) + (c.in_place ? "_inplace" : "_outofplace");
  if (has_root(c.coll)) s += c.root == Root::last ? "_rootlast" : "_root0";
  return s;
}

// The reduction inputs of the host grid (grid.h): every result is an integer below 128, exact
// in every type (avg on 2 ranks adds one exact halving).
double reduce_input(const Case& c, int r, std::size_t i) {
  return synk_test::reduce_input(c.op, c.dtype, r, i);
}

double reduce_expected(const Case& c, int n, std::size_t i) {
  const double acc = synk_test::reduce_over_ranks(c.op, c.dtype, n, i);
  return c.op == ReduceOp::avg ? acc / n : acc;
}

// gatherv (scatterv): rank r sends (receives) count + r elements, placed one after another at
// the root; block(k) is the value at position k there.
struct VLayout {
  std::vector<std::size_t> counts, displ;
  std::size_t total = 0;
  VLayout(const Case& c, int n) {
    for (int r = 0; r < n; ++r) {
      counts.push_back(c.count + static_cast<std::size_t>(r));
      displ.push_back(total);
      total += counts.back();
    }
  }
  double block(std::size_t k) const {
    std::size_t r = 0;
    while (r + 1 < displ.size() && k >= displ[r + 1]) ++r;
    return data(static_cast<int>(r), k - displ[r]);
  }
};

// Under the fake NCCL, a call of count > 0 on 2 ranks or more that finished without an NCCL call
// did not go through NCCL (the fake's device memory is host memory, so a result computed some
// other way would be right all the same).
class ThroughNccl {
 public:
  ThroughNccl(bool expected, std::string what)
      : expected_(expected), what_(std::move(what)), before_(synk::testing::fake_nccl_calls()) {}
  ~ThroughNccl() {
    if (expected_ && before_ >= 0) {
      EXPECT_GT(synk::testing::fake_nccl_calls(), before_) << what_ << ": no NCCL call";
    }
  }
  ThroughNccl(const ThroughNccl&) = delete;
  ThroughNccl& operator=(const ThroughNccl&) = delete;

 private:
  bool expected_;
  std::string what_;
  long before_;
};

// What every collective's check shares: the case, the communicator, this rank, the size, the
// root, and the text that names them in a failure.
struct CaseRun {
  const Case& c;
  synk::Communicator& comm;
  int me, n, root;
  std::string what;
};

// A receive buffer off the root holds what it was filled with.
const auto sentinel = [](std::size_t) { return kSentinel; };

// all_reduce and reduce.
void check_reduce(const CaseRun& run) {
  const Case& c = run.c;
  const int me = run.me, n = run.n, root = run.root;
  const std::size_t count = c.count;
  const std::string& what = run.what;
  const auto in = [&](std::size_t i) { return reduce_input(c, me, i); };
  const auto out = [&](std::size_t i) { return reduce_expected(c, n, i); };
  Buffer send(c.dtype, count), recv(c.dtype, count);
  send.fill(in);
  recv.fill_value(kSentinel);
  Device ds(send, c.dtype), dr(recv, c.dtype);
  void* r = c.in_place ? ds.data() : dr.data();
  if (c.coll == Coll::all_reduce)
    run.comm.all_reduce(ds.data(), r, count, c.dtype, c.op);
  else
    run.comm.reduce(ds.data(), r, count, c.dtype, c.op, root);
  ds.copy_to(send);
  dr.copy_to(recv);
  const bool result_here = c.coll == Coll::all_reduce || me == root;
  Buffer& res = c.in_place ? send : recv;
  if (result_here) {
    EXPECT_TRUE(res.check(out, what + ", result"));
  } else {
    EXPECT_TRUE(res.check(c.in_place ? std::function<double(std::size_t)>(in) : sentinel,
                          what + ", untouched off the root"));
  }
  if (!c.in_place) {
    EXPECT_TRUE(send.check(in, what + ", send unchanged"));
  }
}

void check_reduce_scatter(const CaseRun& run) {
  const Case& c = run.c;
  const int me = run.me, n = run.n;
  const std::size_t count = c.count, un = static_cast<std::size_t>(n);
  const std::string& what = run.what;
  const std::size_t from = count * static_cast<std::size_t>(me);
  const auto in = [&](std::size_t k) { return reduce_input(c, me, k); };
  Buffer send(c.dtype, count * un), recv(c.dtype, count);
  send.fill(in);
  recv.fill_value(kSentinel);
  Device ds(send, c.dtype), dr(recv, c.dtype);
  run.comm.reduce_scatter(ds.data(), c.in_place ? ds.at(from) : dr.data(), count, c.dtype, c.op);
  ds.copy_to(send);
  dr.copy_to(recv);
  if (c.in_place) {
    EXPECT_TRUE(send.check(
        [&](std::size_t k) {
          return k >= from && k < from + count ? reduce_expected(c, n, k) : in(k);
        },
        what + ", send (block rank = result)"));
  } else {
    EXPECT_TRUE(recv.check([&](std::size_t j) { return reduce_expected(c, n, from + j); },
                           what + ", recv"));
    EXPECT_TRUE(send.check(in, what + ", send unchanged"));
  }
}

void check_broadcast(const CaseRun& run) {
  const Case& c = run.c;
  const int me = run.me, root = run.root;
  const std::size_t count = c.count;
  Buffer buf(c.dtype, count);
  if (me == root)
    buf.fill([&](std::size_t i) { return data(root, i); });
  else
    buf.fill_value(kSentinel);
  Device d(buf, c.dtype);
  run.comm.broadcast(d.data(), count, c.dtype, root);
  d.copy_to(buf);
  EXPECT_TRUE(buf.check([&](std::size_t i) { return data(root, i); }, run.what + ", buf"));
}

// all_gather and gather.
void check_gather(const CaseRun& run) {
  const Case& c = run.c;
  const int me = run.me, root = run.root;
  const std::size_t count = c.count, un = static_cast<std::size_t>(run.n);
  const std::string& what = run.what;
  const auto mine = [&](std::size_t i) { return data(me, i); };
  const bool gets = c.coll == Coll::all_gather || me == root;
  const std::size_t from = count * static_cast<std::size_t>(me);
  const auto gathered = [&](std::size_t k) {
    return data(static_cast<int>(k / count), k % count);
  };
  Buffer send(c.dtype, count), recv(c.dtype, count * un);
  send.fill(mine);
  recv.fill_value(kSentinel);
  if (c.in_place && gets)
    recv.fill([&](std::size_t k) { return data(me, k - from); }, from, from + count);
  Device ds(send, c.dtype), dr(recv, c.dtype);
  const void* s = c.in_place && gets ? dr.at(from) : ds.data();
  if (c.coll == Coll::all_gather)
    run.comm.all_gather(s, dr.data(), count, c.dtype);
  else
    run.comm.gather(s, gets ? dr.data() : nullptr, count, c.dtype, root);
  dr.copy_to(recv);
  ds.copy_to(send);
  EXPECT_TRUE(recv.check(gets ? std::function<double(std::size_t)>(gathered) : sentinel,
                         what + ", recv"));
  EXPECT_TRUE(send.check(mine, what + ", send unchanged"));
}

void check_gatherv(const CaseRun& run) {
  const Case& c = run.c;
  const int me = run.me, root = run.root;
  const std::size_t um = static_cast<std::size_t>(me);
  const auto mine = [&](std::size_t i) { return data(me, i); };
  const VLayout v(c, run.n);
  const std::size_t mine_n = v.counts[um], from = v.displ[um];
  const auto gathered = [&](std::size_t k) { return v.block(k); };
  Buffer send(c.dtype, mine_n), recv(c.dtype, v.total);
  send.fill(mine);
  recv.fill_value(kSentinel);
  const bool in_place = c.in_place && me == root;
  if (in_place)
    recv.fill([&](std::size_t k) { return data(me, k - from); }, from, from + mine_n);
  Device ds(send, c.dtype), dr(recv, c.dtype);
  run.comm.gatherv(in_place ? dr.at(from) : ds.data(), mine_n, me == root ? dr.data() : nullptr,
                   v.counts, c.dtype, root);
  dr.copy_to(recv);
  EXPECT_TRUE(recv.check(me == root ? std::function<double(std::size_t)>(gathered) : sentinel,
                         run.what + ", recv"));
}

void check_scatter(const CaseRun& run) {
  const Case& c = run.c;
  const int me = run.me, root = run.root;
  const std::size_t count = c.count, un = static_cast<std::size_t>(run.n);
  const std::string& what = run.what;
  const auto mine = [&](std::size_t i) { return data(me, i); };
  const auto blocks = [&](std::size_t k) {
    return data(static_cast<int>(k / count), k % count);
  };
  const std::size_t from = count * static_cast<std::size_t>(me);
  Buffer send(c.dtype, count * un), recv(c.dtype, count);
  send.fill(blocks);
  recv.fill_value(kSentinel);
  Device ds(send, c.dtype), dr(recv, c.dtype);
  const bool in_place = c.in_place && me == root;
  run.comm.scatter(me == root ? ds.data() : nullptr, in_place ? ds.at(from) : dr.data(), count,
                   c.dtype, root);
  ds.copy_to(send);
  dr.copy_to(recv);
  if (in_place) {
    EXPECT_TRUE(send.check(blocks, what + ", send (own block in place)"));
  } else {
    EXPECT_TRUE(recv.check(mine, what + ", recv"));
  }
}

void check_scatterv(const CaseRun& run) {
  const Case& c = run.c;
  const int me = run.me, root = run.root;
  const std::size_t um = static_cast<std::size_t>(me);
  const std::string& what = run.what;
  const auto mine = [&](std::size_t i) { return data(me, i); };
  const VLayout v(c, run.n);
  const std::size_t mine_n = v.counts[um], from = v.displ[um];
  const auto blocks = [&](std::size_t k) { return v.block(k); };
  Buffer send(c.dtype, v.total), recv(c.dtype, mine_n);
  send.fill(blocks);
  recv.fill_value(kSentinel);
  Device ds(send, c.dtype), dr(recv, c.dtype);
  const bool in_place = c.in_place && me == root;
  run.comm.scatterv(me == root ? ds.data() : nullptr, v.counts,
                    in_place ? ds.at(from) : dr.data(), mine_n, c.dtype, root);
  ds.copy_to(send);
  dr.copy_to(recv);
  if (in_place) {
    EXPECT_TRUE(send.check(blocks, what + ", send (own block in place)"));
  } else {
    EXPECT_TRUE(recv.check(mine, what + ", recv"));
  }
}

// Block q of rank r's send holds data(r * n + q, i).
void check_all_to_all(const CaseRun& run) {
  const Case& c = run.c;
  const int me = run.me, n = run.n;
  const std::size_t count = c.count, un = static_cast<std::size_t>(n);
  const auto pair = [&](std::size_t k) { return static_cast<int>(k / count); };
  const auto sent = [&](std::size_t k) { return data(me * n + pair(k), k % count); };
  const auto received = [&](std::size_t k) { return data(pair(k) * n + me, k % count); };
  Buffer send(c.dtype, count * un), recv(c.dtype, count * un);
  send.fill(sent);
  recv.fill_value(kSentinel);
  Device ds(send, c.dtype), dr(recv, c.dtype);
  run.comm.all_to_all(ds.data(), dr.data(), count, c.dtype);
  ds.copy_to(send);
  dr.copy_to(recv);
  EXPECT_TRUE(recv.check(received, run.what + ", recv"));
  EXPECT_TRUE(send.check(sent, run.what + ", send unchanged"));
}

// Rank r sends rank q count + (r + q) % 3 of data(r * n + q, i).
void check_all_to_allv(const CaseRun& run) {
  const Case& c = run.c;
  const int me = run.me, n = run.n;
  const std::size_t count = c.count;
  const auto pair = [&](int r, int q) { return count + static_cast<std::size_t>(r + q) % 3; };
  std::vector<std::size_t> send_counts, recv_counts;
  std::vector<double> sent, received;
  for (int q = 0; q < n; ++q) {
    send_counts.push_back(pair(me, q));
    recv_counts.push_back(pair(q, me));
    for (std::size_t i = 0; i < send_counts.back(); ++i) sent.push_back(data(me * n + q, i));
    for (std::size_t i = 0; i < recv_counts.back(); ++i) {
      received.push_back(data(q * n + me, i));
    }
  }
  Buffer send(c.dtype, sent.size()), recv(c.dtype, received.size());
  send.fill([&](std::size_t k) { return sent[k]; });
  recv.fill_value(kSentinel);
  Device ds(send, c.dtype), dr(recv, c.dtype);
  run.comm.all_to_allv(ds.data(), send_counts, dr.data(), recv_counts, c.dtype);
  dr.copy_to(recv);
  EXPECT_TRUE(recv.check([&](std::size_t k) { return received[k]; }, run.what + ", recv"));
}

class NcclGrid : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (no_device()) GTEST_SKIP() << *no_device();
    if (synk::testing::nccl_unavailable()) GTEST_SKIP() << *synk::testing::nccl_unavailable();
  }
};

TEST_P(NcclGrid, MatchesTheExactResult) {
  const Case& c = GetParam();
  synk::Communicator& comm = nccl();
  const int me = comm.rank(), n = comm.size();
  const CaseRun run{c, comm, me, n, root_of(c.root, n),
                    "rank " + std::to_string(me) + " of " + std::to_string(n) + ", " +
                        case_name(::testing::TestParamInfo<Case>(c, 0))};
  const ThroughNccl through_nccl(c.count > 0 && n > 1, run.what);  // one rank's gather: a copy
  switch (c.coll) {
    case Coll::all_reduce:
    case Coll::reduce:
      check_reduce(run);
      break;
    case Coll::reduce_scatter:
      check_reduce_scatter(run);
      break;
    case Coll::broadcast:
      check_broadcast(run);
      break;
    case Coll::all_gather:
    case Coll::gather:
      check_gather(run);
      break;
    case Coll::gatherv:
      check_gatherv(run);
      break;
    case Coll::scatter:
      check_scatter(run);
      break;
    case Coll::scatterv:
      check_scatterv(run);
      break;
    case Coll::all_to_all:
      check_all_to_all(run);
      break;
    case Coll::all_to_allv:
      check_all_to_allv(run);
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(Nccl, NcclGrid, ::testing::ValuesIn(all_cases()), case_name);

class NcclComm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (no_device()) GTEST_SKIP() << *no_device();
    if (synk::testing::nccl_unavailable()) GTEST_SKIP() << *synk::testing::nccl_unavailable();
  }
};

TEST_F(NcclComm, NamesItsBackend) { EXPECT_EQ(nccl().backend(), "nccl"); }

// device() is where the collectives run, so a DeviceBuffer made there is what they take.
TEST_F(NcclComm, NamesItsDeviceAndTakesBuffersMadeThere) {
  synk::Communicator& comm = nccl();
  comm.barrier();  // the communicator's device is current from here
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(comm.device(), current);
  const std::vector<float> mine(3, static_cast<float>(comm.rank() + 1));
  synk::DeviceBuffer buf(mine.size() * sizeof(float), comm.device());
  buf.copy_from_host(mine.data(), buf.bytes());
  comm.all_reduce(buf.data(), buf.data(), mine.size(), DataType::float32, ReduceOp::sum);
  std::vector<float> sum(mine.size(), 0.0f);
  buf.copy_to_host(sum.data(), buf.bytes());
  const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
  EXPECT_THAT(sum, ::testing::Each(want));
}

TEST_F(NcclComm, BarrierCompletes) {
  for (int i = 0; i < 3; ++i) nccl().barrier();
}

// communicator.h: "a Request destroyed before then waits for it". On nccl it only gave its
// event back, and the root's own block of a gather (a copy queued on the stream after NCCL's
// receives) was not there yet when the caller read the result.
TEST_F(NcclComm, ARequestDroppedBeforeItEndsWaitsForIt) {
  synk::Communicator& comm = nccl();
  const std::size_t n = 2;
  const std::vector<float> mine(n, static_cast<float>(comm.rank() + 1));
  const std::size_t all = n * static_cast<std::size_t>(comm.size());
  synk::DeviceBuffer send(n * sizeof(float), comm.device());
  synk::DeviceBuffer recv(all * sizeof(float), comm.device());
  send.copy_from_host(mine.data(), send.bytes());
  const std::vector<float> zeros(all, 0.0f);
  recv.copy_from_host(zeros.data(), recv.bytes());
  {
    synk::Request dropped = comm.igather(send.data(), recv.data(), n, DataType::float32, 0);
  }
  std::vector<float> got(all, -1.0f);
  recv.copy_to_host(got.data(), recv.bytes());
  if (comm.rank() == 0) {
    std::vector<float> want;
    for (int r = 0; r < comm.size(); ++r) want.insert(want.end(), n, static_cast<float>(r + 1));
    EXPECT_EQ(got, want);
  }
}

TEST_F(NcclComm, HostBuffersAreRejected) {
  std::vector<float> host(4, 1.0f);
  const auto e = synk_test::caught([&] {
    nccl().all_reduce(host.data(), host.data(), host.size(), DataType::float32, ReduceOp::sum);
  });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), synk::ErrorCode::InvalidArgument);
  EXPECT_THAT(e->what(), ::testing::HasSubstr("not CUDA device memory"));
}

// NCCL has no 16-bit integers: they move (the grid), and a reduction of them is refused on
// every rank before NCCL is called, naming what to do instead; the communicator goes on.
TEST_F(NcclComm, Int16ReductionsAreRefused) {
  synk::Communicator& comm = nccl();
  synk::DeviceBuffer buf(4 * sizeof(std::int16_t), comm.device());
  for (DataType t : {DataType::int16, DataType::uint16}) {
    const auto e = synk_test::caught(
        [&] { comm.all_reduce(buf.data(), buf.data(), 4, t, ReduceOp::sum); });
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->code(), synk::ErrorCode::InvalidArgument);
    EXPECT_THAT(e->what(), ::testing::HasSubstr(std::string("NCCL has no ") +
                                                synk::to_string(t) + " reduction"));
  }
  comm.barrier();
}

// Memory of another device than the communicator's: NCCL's kernel would touch it without peer
// access (an illegal address, which loses the rank's CUDA context). Refused, naming both.
TEST_F(NcclComm, MemoryOfAnotherDeviceIsRejected) {
  int count = 0, mine = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "needs a second device";
  nccl().barrier();  // the communicator's device is current from here
  ASSERT_EQ(cudaGetDevice(&mine), cudaSuccess);
  const int other = (mine + 1) % count;
  void* p = nullptr;
  ASSERT_EQ(cudaSetDevice(other), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&p, 16), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(mine), cudaSuccess);
  const auto e = synk_test::caught(
      [&] { nccl().all_reduce(p, p, 4, DataType::float32, ReduceOp::sum); });
  cudaFree(p);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), synk::ErrorCode::InvalidArgument);
  EXPECT_THAT(e->what(), ::testing::HasSubstr("send is memory of CUDA device " +
                                              std::to_string(other) +
                                              ", but this communicator's NCCL runs on device " +
                                              std::to_string(mine)));
}

// A host buffer on one rank only: the others queued their NCCL call and waited in it until
// SYNK_TIMEOUT. Under SYNK_CHECK_CALLS (its own ctest entry) every rank fails the call, naming
// the rank and why, and the next call works.
TEST_F(NcclComm, AHostBufferOnOneRankFailsTheCallEverywhereUnderCheckCalls) {
  const char* checks = std::getenv("SYNK_CHECK_CALLS");
  if (checks == nullptr || std::string(checks) != "1") {
    GTEST_SKIP() << "runs under SYNK_CHECK_CALLS=1 (nccl_collectives_fake_checked_np2)";
  }
  if (nccl().size() < 2) GTEST_SKIP() << "needs a rank that differs";
  Buffer host(DataType::float32, 4);
  host.fill_value(1);
  Device d(host, DataType::float32);
  std::vector<float> plain(4, 1.0f);
  const int odd = nccl().size() - 1;
  void* p = nccl().rank() == odd ? static_cast<void*>(plain.data()) : d.data();
  const auto e = synk_test::caught(
      [&] { nccl().all_reduce(p, p, 4, DataType::float32, ReduceOp::sum); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), nccl().rank() == odd ? synk::ErrorCode::InvalidArgument
                                            : synk::ErrorCode::Remote);
  EXPECT_THAT(e->what(), ::testing::HasSubstr("send is not CUDA device memory"));
  if (nccl().rank() != odd) {
    EXPECT_THAT(e->what(), ::testing::HasSubstr("rank " + std::to_string(odd) + " rejected"));
  }
  nccl().all_reduce(d.data(), d.data(), 4, DataType::float32, ReduceOp::sum);
  d.copy_to(host);
  EXPECT_TRUE(host.check([&](std::size_t) { return static_cast<double>(nccl().size()); },
                         "after the rejected call"));
}

// A split gets its own NCCL communicator on the same device.
TEST_F(NcclComm, SplitCommunicatorReduces) {
  synk::Communicator part = nccl().split(nccl().rank() % 2, 0);
  EXPECT_EQ(part.backend(), "nccl");
  Buffer host(DataType::int32, 5);
  host.fill_value(1);
  Device d(host, DataType::int32);
  part.all_reduce(d.data(), d.data(), 5, DataType::int32, ReduceOp::sum);
  d.copy_to(host);
  EXPECT_TRUE(host.check([&](std::size_t) { return static_cast<double>(part.size()); }, "split"));
}

// A call that never ends on the device (the fake NCCL's synk_fake_nccl_stall_next, as a peer
// that never comes would leave it): every way of waiting for it ends at SYNK_TIMEOUT, and the
// communicator is aborted. Each test makes its own communicator, since it ends aborted; run by
// nccl_stall_fake_np* under SYNK_TIMEOUT=1, skipped elsewhere (a real GPU, a long timeout).
class NcclStall : public ::testing::Test {
 protected:
  void SetUp() override {
    stall_next_ = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "synk_fake_nccl_stall_next"));
    if (stall_next_ == nullptr) GTEST_SKIP() << "needs the fake NCCL (synk_fake_nccl_stall_next)";
    const char* timeout = std::getenv("SYNK_TIMEOUT");
    if (timeout == nullptr || std::atof(timeout) > 5) GTEST_SKIP() << "needs SYNK_TIMEOUT <= 5";
    timeout_s_ = std::atof(timeout);
    comm_ = std::make_unique<synk::Communicator>(MPI_COMM_WORLD, synk::CommOptions{"nccl"});
    buf_ = std::make_unique<synk::DeviceBuffer>(4 * sizeof(float), comm_->device());
  }
  // A started all_reduce of buf_ whose work never ends.
  synk::Request stalled_call() {
    stall_next_();
    return comm_->iall_reduce(buf_->data(), buf_->data(), 4, DataType::float32, ReduceOp::sum);
  }
  void expect_aborted() {
    const auto e = synk_test::caught([&] {
      comm_->all_reduce(buf_->data(), buf_->data(), 4, DataType::float32, ReduceOp::sum);
    });
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->code(), synk::ErrorCode::InvalidUsage);
    EXPECT_THAT(e->what(), ::testing::HasSubstr("the NCCL communicator was aborted earlier"));
  }
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  void (*stall_next_)() = nullptr;
  double timeout_s_ = 0;
  std::unique_ptr<synk::Communicator> comm_;
  std::unique_ptr<synk::DeviceBuffer> buf_;
};

TEST_F(NcclStall, WaitTimesOutAndAborts) {
  synk::Request r = stalled_call();
  const auto e = synk_test::caught([&] { r.wait(); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), synk::ErrorCode::Timeout);
  EXPECT_THAT(e->what(), ::testing::HasSubstr("waited for the NCCL operation on its stream"));
  expect_aborted();
}

// test() is what wait_any polls: it had no deadline, so a stuck call was polled for ever.
TEST_F(NcclStall, TestTimesOutAsWaitDoes) {
  synk::Request r = stalled_call();
  const auto t0 = std::chrono::steady_clock::now();
  const auto e = synk_test::caught([&] {
    while (!r.test() && seconds_since(t0) < 3 * timeout_s_ + 5) std::this_thread::yield();
  });
  ASSERT_TRUE(e.has_value()) << "test() still polled after " << seconds_since(t0) << " s";
  EXPECT_EQ(e->code(), synk::ErrorCode::Timeout);
  expect_aborted();
}

// A Request dropped before it ends waits for it (communicator.h), but no longer than SYNK_TIMEOUT.
TEST_F(NcclStall, ADroppedRequestWaitsNoLongerThanTheTimeout) {
  const auto t0 = std::chrono::steady_clock::now();
  { synk::Request dropped = stalled_call(); }
  const double waited = seconds_since(t0);
  EXPECT_GE(waited, 0.9 * timeout_s_);
  EXPECT_LT(waited, 3 * timeout_s_ + 5);
  expect_aborted();
}

}  // namespace
