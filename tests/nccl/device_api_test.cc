// synk/device.h: named contexts, DeviceBuffer, DeviceShared and the staging of Data rows to the
// device. The errors (a build without CUDA, no visible device, a communicator that is not nccl)
// and the context lookups run everywhere. The device tests skip with the reason where no device
// is visible, and run for real on a GPU node; ctest also runs them here under the fake CUDA
// runtime and fake NCCL (fake_cuda_device.cc, fake_nccl.cc), which defer every queued copy until
// it is waited for, so a staging buffer reused too early shows up as wrong rows.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <synk/synk.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fake_cuda_device.h"
#include "mpi_test.h"
#include "nccl_test_comm.h"

#if SYNK_BUILT_WITH_NCCL
#include <cuda_runtime_api.h>
#endif

namespace {

using synk::ErrorCode;
using synk_test::caught;
using synk_test::message;
using synk_test::world;

// Why the device tests cannot run here, or nothing.
const std::optional<std::string>& no_device() {
  static const std::optional<std::string> why = []() -> std::optional<std::string> {
    try {
      synk::device_count();
      return std::nullopt;
    } catch (const synk::Error& e) {
      return std::string("no CUDA device visible: ") + e.what();
    }
  }();
  return why;
}

#define SKIP_WITHOUT_DEVICE() \
  if (const auto& why_ = no_device()) GTEST_SKIP() << *why_
// ... and for the tests on the NCCL communicator, without a device per rank.
#define SKIP_WITHOUT_NCCL()                                            \
  SKIP_WITHOUT_DEVICE();                                               \
  if (const auto& why_ = synk::testing::nccl_unavailable()) GTEST_SKIP() << *why_

using synk::testing::nccl;

// The fake runtime's counters, when it is loaded.
std::optional<SynkFakeCudaStats> fake_stats() {
  using Fn = SynkFakeCudaStats (*)();
  const auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "synk_fake_cuda_stats"));
  if (!fn) return std::nullopt;
  return fn();
}

// got[i] == want(i) for every i; the first wrong index and both values otherwise.
::testing::AssertionResult matches(const std::vector<float>& got, std::size_t n,
                                   const std::function<double(std::size_t)>& want,
                                   const std::string& what) {
  if (got.size() != n) {
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " elements, expected " << n;
  }
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (static_cast<double>(got[i]) != want(i) && wrong++ == 0) first = i;
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": element " << first << " is " << got[first] << ", expected " << want(first)
         << " (" << wrong << " of " << n << " wrong)";
}

std::vector<float> iota_values(std::size_t n, const std::function<double(std::size_t)>& f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(f(i));
  return v;
}

// ---- Errors that need no device ----

#if !SYNK_BUILT_WITH_NCCL

TEST(DeviceApi, BuildWithoutCudaSaysSoInEveryEntryPoint) {
  const std::string tail =
      ": synk was built without CUDA/NCCL (configured with SYNK_WITH_NCCL=OFF or without the "
      "CUDA toolkit and NCCL), so device memory is not available";
  const auto expect = [&](const std::optional<synk::Error>& e, const std::string& who) {
    ASSERT_TRUE(e.has_value()) << who;
    EXPECT_EQ(e->code(), ErrorCode::NotSupported) << message(e);
    EXPECT_EQ(message(e), "synk NotSupported: " + who + tail);
  };
  expect(caught([] { synk::device_count(); }), "device_count");
  expect(caught([] { synk::DeviceBuffer b(16, 0); }), "DeviceBuffer");
  expect(caught([] { synk::DeviceStager s; }), "DeviceStager");
  expect(caught([] {
           synk::DeviceShared<float> w(world(), "w", std::vector<float>{1, 2});
         }),
         "DeviceShared 'w'");
  synk::DeviceBuffer empty;  // holds nothing, so it needs no device
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.bytes(), 0u);
  EXPECT_NO_THROW(empty.copy_from_host(nullptr, 0));
}

#else

TEST(DeviceApi, NoDeviceIsNotSupportedWithCudasReason) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc == cudaSuccess && count > 0) GTEST_SKIP() << "a CUDA device is visible";
  const std::string reason =
      rc != cudaSuccess ? std::string(cudaGetErrorString(rc)) : std::string("found 0 devices");
  cudaGetLastError();
  const auto expect = [&](const std::optional<synk::Error>& e, const std::string& who) {
    ASSERT_TRUE(e.has_value()) << who;
    EXPECT_EQ(e->code(), ErrorCode::NotSupported) << message(e);
    EXPECT_EQ(message(e), "synk NotSupported: " + who +
                              ": no CUDA device is visible (cudaGetDeviceCount: " + reason + ")");
  };
  expect(caught([] { synk::device_count(); }), "device_count");
  expect(caught([] { synk::DeviceBuffer b(16, 0); }), "DeviceBuffer");
  expect(caught([] { synk::DeviceStager s; }), "DeviceStager");
}

TEST(DeviceApi, DeviceSharedNeedsTheNcclBackendOrAuto) {
  synk::Communicator host(MPI_COMM_WORLD, synk::CommOptions{"shm"});  // host memory only
  const auto e = caught([&] { synk::DeviceShared<float> w(host, "w", std::vector<float>{1, 2}); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), ErrorCode::NotSupported) << message(e);
  EXPECT_EQ(message(e),
            "synk NotSupported: DeviceShared 'w': a value in device memory needs a "
            "communicator on the nccl backend or on auto, but this one uses 'shm' (create it "
            "with CommOptions{\"nccl\"} or \"auto\")");
}

#endif

// ---- SYNK_CONTEXTS through the public API (ctest sets the variable for some runs) ----

bool contexts_are(const char* spec) {
  const char* v = std::getenv("SYNK_CONTEXTS");
  return v && std::string(v) == spec;
}

TEST(DeviceContexts, NamesAndDevicesOfTheMap) {
  if (!contexts_are("main->cuda0;aux->cuda1"))
    GTEST_SKIP() << "needs SYNK_CONTEXTS=main->cuda0;aux->cuda1 (set by ctest)";
  EXPECT_EQ(synk::context_names(), (std::vector<std::string>{"main", "aux"}));
  EXPECT_EQ(synk::device_for("main"), 0);
  EXPECT_EQ(synk::device_for("aux"), 1);
  const auto e = caught([] { synk::device_for("dev9"); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(message(e),
            "synk InvalidArgument: device_for: no context named 'dev9' in "
            "SYNK_CONTEXTS (it names main, aux)");
}

TEST(DeviceContexts, WithoutTheVariableEveryNameIsUnknown) {
  const char* v = std::getenv("SYNK_CONTEXTS");
  if (v && *v) GTEST_SKIP() << "SYNK_CONTEXTS is set";
  EXPECT_TRUE(synk::context_names().empty());
  const auto e = caught([] { synk::device_for("dev0"); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(message(e),
            "synk InvalidArgument: device_for: no context named 'dev0': "
            "SYNK_CONTEXTS is not set (e.g. SYNK_CONTEXTS=\"dev0->cuda0\")");
}

// Theano's rules: a name may map to a device this rank does not see while it is not used (one
// map serves ranks that see different devices); the NCCL start prints a line per name at
// SYNK_LOG=info; a value placed by the unseen name is refused.
TEST(DeviceContexts, AnUnusedNameMayMapToADeviceNotSeen) {
  if (!contexts_are("main->cuda0;spare->cuda7"))
    GTEST_SKIP() << "needs SYNK_CONTEXTS=main->cuda0;spare->cuda7 and SYNK_LOG=info (set by ctest)";
  SKIP_WITHOUT_DEVICE();
  ::testing::internal::CaptureStderr();
  const std::optional<std::string>& why = synk::testing::nccl_unavailable();  // NCCL starts
  const std::string log = ::testing::internal::GetCapturedStderr();
  if (why) GTEST_SKIP() << *why;
  EXPECT_THAT(log, ::testing::HasSubstr("Mapped name main to device cuda0: "));
  EXPECT_THAT(log, ::testing::HasSubstr("Name spare maps to cuda7, which this rank does not see "
                                        "(allowed while the name is not used)"));
  synk::DeviceShared<float> v(nccl(), "v", std::vector<float>{1.0f}, {}, "main");
  v.all_reduce(synk::ReduceOp::sum);
  EXPECT_EQ(v.to_host(), std::vector<float>{static_cast<float>(nccl().size())});
  const auto e =
      caught([] { synk::DeviceShared<float> w(nccl(), "w", std::vector<float>{1.0f}, {}, "spare"); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e), ::testing::HasSubstr("context 'spare' -> cuda7"));
}

// ---- On a device ----

TEST(DeviceBufferTest, CopiesToAndFromTheDeviceAndChecksBounds) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<float> in = iota_values(1000, [](std::size_t i) { return i * 3.0 - 7; });
  synk::DeviceBuffer b(in.size() * sizeof(float), 0);
  EXPECT_NE(b.data(), nullptr);
  EXPECT_EQ(b.device(), 0);
  b.copy_from_host(in.data(), in.size() * sizeof(float));
  b.copy_from_host(in.data(), 10 * sizeof(float), 500);  // bytes 500..539: elements 125..134
  std::vector<float> out(in.size());
  b.copy_to_host(out.data(), out.size() * sizeof(float));
  EXPECT_TRUE(matches(
      out, in.size(),
      [](std::size_t i) { return i >= 125 && i < 135 ? (i - 125) * 3.0 - 7 : i * 3.0 - 7; },
      "round trip"));

  const auto past = caught([&] { b.copy_to_host(out.data(), 8, 3996); });
  ASSERT_TRUE(past.has_value());
  EXPECT_EQ(past->code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(message(past),
            "synk InvalidArgument: DeviceBuffer::copy_to_host: 8 bytes at offset "
            "3996 pass the end of the 4000-byte DeviceBuffer");
  const int n = synk::device_count();
  const auto invisible = caught([n] { synk::DeviceBuffer x(4, n); });
  ASSERT_TRUE(invisible.has_value());
  EXPECT_EQ(invisible->code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(message(invisible), "synk InvalidArgument: DeviceBuffer: CUDA device " +
                                    std::to_string(n) + " is not visible: this rank sees " +
                                    std::to_string(n) + " device(s) (cuda0..cuda" +
                                    std::to_string(n - 1) + ")");

  synk::DeviceBuffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is defined
  moved.copy_to_host(out.data(), 4);
  EXPECT_EQ(out[0], -7.0f);
}

TEST(DeviceSharedTest, AllReduceAvgOnTheDeviceIsExact) {
  SKIP_WITHOUT_NCCL();
  synk::Communicator& comm = nccl();
  const int r = comm.rank(), n = comm.size();
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4097}}) {
    // Rank r holds (i % 97) + 2r: the mean, (i % 97) + (n - 1), is exact in float.
    const auto mine = [r](std::size_t i) { return static_cast<double>(i % 97) + 2.0 * r; };
    synk::DeviceShared<float> w(comm, "w", iota_values(count, mine));
    EXPECT_EQ(w.size(), count);
    w.all_reduce();  // avg
    EXPECT_TRUE(matches(
        w.to_host(), count, [n](std::size_t i) { return static_cast<double>(i % 97) + (n - 1); },
        "all_reduce avg, count " + std::to_string(count)));
  }
}

TEST(DeviceSharedTest, ReduceAndBroadcastGiveTheRootsValueAndShape) {
  SKIP_WITHOUT_NCCL();
  synk::Communicator& comm = nccl();
  const int r = comm.rank(), n = comm.size(), root = n - 1;
  synk::DeviceShared<float> w(comm, "w", iota_values(12, [r](std::size_t i) { return i + r; }),
                              {3, 4});
  w.reduce(synk::ReduceOp::sum, root);
  // At the root: sum over ranks of (i + r) = n i + n(n-1)/2; elsewhere the value is unchanged.
  EXPECT_TRUE(matches(
      w.to_host(), 12,
      [&](std::size_t i) {
        return r == root ? n * static_cast<double>(i) + n * (n - 1) / 2.0
                         : static_cast<double>(i + r);
      },
      "reduce sum"));

  // Ranks other than the root start with another shape; broadcast gives them the root's.
  if (r != root) w.to_device(std::vector<float>{-1.0f}, {1});
  w.broadcast(root);
  EXPECT_EQ(w.shape(), (std::vector<std::size_t>{3, 4}));
  EXPECT_TRUE(matches(
      w.to_host(), 12,
      [n](std::size_t i) { return n * static_cast<double>(i) + n * (n - 1) / 2.0; }, "broadcast"));
}

TEST(DeviceSharedTest, RoundTripThroughAHostShared) {
  SKIP_WITHOUT_NCCL();
  synk::Communicator& comm = nccl();
  const int r = comm.rank(), n = comm.size();
  synk::Shared<float> host(comm, "h", iota_values(6, [r](std::size_t i) { return 10.0 * r + i; }),
                           {2, 3});
  synk::DeviceShared<float> dev(comm, "h");
  dev.to_device(host);
  EXPECT_EQ(dev.shape(), (std::vector<std::size_t>{2, 3}));
  dev.all_reduce(synk::ReduceOp::max);
  dev.to_host(host);
  EXPECT_EQ(host.shape(), (std::vector<std::size_t>{2, 3}));
  EXPECT_TRUE(matches(
      host.value(), 6, [n](std::size_t i) { return 10.0 * (n - 1) + i; }, "max through Shared"));
}

// Each SYNK_CONTEXTS name places a value on its device; one that is not the NCCL device reaches
// the collective through peer copies to it and back.
TEST(DeviceSharedTest, EveryNamedContextHoldsAValue) {
  SKIP_WITHOUT_NCCL();
  const std::vector<std::string> names = synk::context_names();
  if (names.empty()) GTEST_SKIP() << "SYNK_CONTEXTS is not set";
  synk::Communicator& comm = nccl();
  const int nccl_device = synk::DeviceStager().device();  // the default: the NCCL device
  const int r = comm.rank(), n = comm.size();
  for (const std::string& name : names) {
    const auto before = fake_stats();
    synk::DeviceShared<float> w(
        comm, "w_" + name,
        iota_values(513, [r](std::size_t i) { return (r + 1.0) * (i % 50 + 1); }), {}, name);
    EXPECT_EQ(w.device(), synk::device_for(name)) << name;
    w.all_reduce(synk::ReduceOp::sum);
    EXPECT_TRUE(matches(
        w.to_host(), 513,
        [n](std::size_t i) { return n * (n + 1) / 2.0 * static_cast<double>(i % 50 + 1); },
        "all_reduce sum on context " + name));
    if (const auto after = fake_stats(); after && before) {
      const long peers = after->peer_copies - before->peer_copies;
      EXPECT_EQ(peers, w.device() == nccl_device ? 0 : 2) << name << " on cuda" << w.device();
    }
  }
  const auto e = caught([&] { synk::DeviceShared<float> w(comm, "w", {}, {}, "nope"); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), ErrorCode::InvalidArgument);
  EXPECT_THAT(message(e), ::testing::HasSubstr("DeviceShared 'w': no context named 'nope'"));
}

// ---- Data rows to the device ----

constexpr std::size_t kRows = 257, kWidth = 33;

double cell(std::size_t row, std::size_t col) { return row * 1000.0 + col; }

// Collective over world(): rows of kWidth values, cell(row, col) each. Made per test, so it is
// freed while MPI is up.
std::unique_ptr<synk::Data<float>> dataset() {
  auto x = std::make_unique<synk::Data<float>>(world(), std::vector<std::size_t>{kRows, kWidth});
  std::vector<float> v(kRows * kWidth);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(cell(i / kWidth, i % kWidth));
  x->set_value(v);
  return x;
}

std::vector<float> read_back(const synk::DeviceBuffer& b, std::size_t elems) {
  std::vector<float> out(elems);
  b.copy_to_host(out.data(), elems * sizeof(float));
  return out;
}

::testing::AssertionResult rows_match(const std::vector<float>& got, const synk::RowSelection& sel,
                                      const std::string& what) {
  return matches(
      got, sel.size() * kWidth, [&](std::size_t i) { return cell(sel[i / kWidth], i % kWidth); },
      what);
}

synk::RowSelection list(std::vector<std::size_t> rows) {
  synk::RowSelection s;
  s.indices = std::move(rows);
  return s;
}

// Batches of every kind of selection, queued back to back with no wait between them: each must
// land intact although the stager has two pinned buffers for six copies.
TEST(DeviceStagerTest, RowsOfEverySelectionLandOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  const auto data = dataset();
  const synk::Data<float>& x = *data;
  synk::RowSelection contiguous{10, 40, 1, {}}, strided{3, 28, 7, {}}, one{256, 1, 1, {}};
  const std::vector<synk::RowSelection> batches = {
      contiguous, strided,  list({200, 5, 5, 0, 256, 17, 99}),
      one,        list({}), synk::RowSelection{0, kRows, 1, {}}};
  const auto before = fake_stats();
  synk::DeviceStager stager;
  std::vector<synk::DeviceBuffer> dst;
  for (const synk::RowSelection& sel : batches) {
    dst.emplace_back(sel.size() * kWidth * sizeof(float), stager.device());
    EXPECT_EQ(synk::take_to_device(x, sel, static_cast<float*>(dst.back().data()), stager),
              sel.size());
  }
  stager.wait();
  for (std::size_t k = 0; k < batches.size(); ++k) {
    EXPECT_TRUE(rows_match(read_back(dst[k], batches[k].size() * kWidth), batches[k],
                           "batch " + std::to_string(k)));
  }
  EXPECT_GE(stager.pinned_bytes(), kRows * kWidth * sizeof(float));
  if (const auto after = fake_stats(); after && before) {
    // Five non-empty batches, each one asynchronous copy out of pinned memory.
    EXPECT_EQ(after->h2d_async_from_pinned - before->h2d_async_from_pinned, 5);
    // Two pinned buffers, grown three times: to 40 rows, to 28, then (the first) to 257.
    EXPECT_EQ(after->pinned_allocs - before->pinned_allocs, 3);
  }
}

TEST(DeviceStagerTest, PinnedBuffersAreReusedOnceLargeEnough) {
  SKIP_WITHOUT_DEVICE();
  const auto data = dataset();
  const synk::Data<float>& x = *data;
  synk::DeviceStager stager;
  synk::DeviceBuffer dst(kRows * kWidth * sizeof(float), stager.device());
  const synk::RowSelection big{0, 200, 1, {}};
  synk::take_to_device(x, big, static_cast<float*>(dst.data()), stager);
  synk::take_to_device(x, big, static_cast<float*>(dst.data()), stager);
  const std::size_t held = stager.pinned_bytes();
  const auto before = fake_stats();
  for (std::size_t k = 0; k < 10; ++k) {
    const synk::RowSelection sel{k, 20 + k * 15, 1, {}};  // at most 200 rows
    synk::take_to_device(x, sel, static_cast<float*>(dst.data()), stager);
    stager.wait();
    EXPECT_TRUE(rows_match(read_back(dst, sel.size() * kWidth), sel, "batch " + std::to_string(k)));
  }
  EXPECT_EQ(stager.pinned_bytes(), held);
  if (const auto after = fake_stats(); after && before) {
    EXPECT_EQ(after->pinned_allocs - before->pinned_allocs, 0);
  }
}

TEST(DeviceStagerTest, ThisRanksShareOfABatch) {
  SKIP_WITHOUT_DEVICE();
  const auto data = dataset();
  const synk::Data<float>& x = *data;
  synk::Communicator& comm = world();
  synk::DeviceStager stager;
  const synk::Batch batch = synk::Batch::indices({9, 8, 7, 100, 200, 250, 3, 1, 0});
  const synk::RowSelection mine = batch.for_rank(kRows, comm.rank(), comm.size());
  synk::DeviceBuffer dst(9 * kWidth * sizeof(float), stager.device());
  EXPECT_EQ(synk::take_to_device(x, batch, comm.rank(), comm.size(), dst, stager), mine.size());
  stager.wait();
  EXPECT_TRUE(rows_match(read_back(dst, mine.size() * kWidth), mine, "rank's share"));

  synk::DeviceBuffer small(8, stager.device());
  const auto e =
      caught([&] { synk::take_to_device(x, synk::Batch::first(4), 0, 1, small, stager); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(message(e),
            "synk InvalidArgument: take_to_device: 4 rows of 132 bytes need 528 bytes "
            "but the DeviceBuffer holds 8");
}

TEST(DeviceStagerTest, RowsOutOfRangeAreRefusedBeforeAnyCopy) {
  SKIP_WITHOUT_DEVICE();
  const auto data = dataset();
  const synk::Data<float>& x = *data;
  synk::DeviceStager stager;
  synk::DeviceBuffer dst(kRows * kWidth * sizeof(float), stager.device());
  float* p = static_cast<float*>(dst.data());
  const auto listed = caught([&] { synk::take_to_device(x, list({3, 300}), p, stager); });
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(message(listed),
            "synk InvalidArgument: DeviceStager::stage: index 1 is row 300, out "
            "of range for 257 rows");
  const auto strided = caught([&] {
    synk::take_to_device(x, synk::RowSelection{250, 3, 4, {}}, p, stager);
  });
  ASSERT_TRUE(strided.has_value());
  EXPECT_EQ(message(strided),
            "synk InvalidArgument: DeviceStager::stage: row 258 is out of range "
            "for 257 rows");
  // A step so large that the last row wraps round past 2^64 to row 1: refused (it passed, and
  // the gather read far outside the data).
  const std::size_t wrap = std::size_t{1} << 63;
  const auto wrapped = caught([&] {
    synk::take_to_device(x, synk::RowSelection{1, 3, wrap, {}}, p, stager);
  });
  ASSERT_TRUE(wrapped.has_value());
  EXPECT_EQ(wrapped->code(), ErrorCode::InvalidArgument);
  EXPECT_THAT(message(wrapped), ::testing::HasSubstr("is past 2^64, out of range for 257 rows"));
}

#if SYNK_BUILT_WITH_NCCL
// The copy is ordered on the caller's stream: after it synchronizes, the rows are there.
TEST(DeviceStagerTest, CopiesOnTheCallersStream) {
  SKIP_WITHOUT_DEVICE();
  const auto data = dataset();
  const synk::Data<float>& x = *data;
  synk::DeviceStager stager;
  synk::DeviceBuffer dst(kRows * kWidth * sizeof(float), stager.device());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaSetDevice(stager.device()), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const synk::RowSelection sel = list({4, 2, 250});
  synk::take_to_device(x, sel, static_cast<float*>(dst.data()), stager, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(rows_match(read_back(dst, sel.size() * kWidth), sel, "caller's stream"));
  stager.wait();
  cudaStreamDestroy(stream);
}

// Communicator::set_stream queues the collective after the caller's earlier work on its stream:
// a copy queued there and never waited for is in the buffer when the all-reduce runs. (On synk's
// own stream it is not: under the fake runtime the copy would then land after the all-reduce.)
TEST(DeviceStreamTest, CollectivesFollowTheCallersWorkOnItsStream) {
  SKIP_WITHOUT_NCCL();
  synk::Communicator& comm = nccl();
  const int r = comm.rank(), n = comm.size();
  const int dev = synk::DeviceStager().device();  // the NCCL device
  constexpr std::size_t kCount = 4097;
  const std::size_t bytes = kCount * sizeof(float);
  std::vector<float> zeros(kCount, 0.0f), mine(kCount), out(kCount);
  for (std::size_t i = 0; i < kCount; ++i) mine[i] = static_cast<float>(i % 97 + static_cast<std::size_t>(r));
  synk::DeviceBuffer buf(bytes, dev);
  buf.copy_from_host(zeros.data(), bytes);
  ASSERT_EQ(cudaSetDevice(dev), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(buf.data(), mine.data(), bytes, cudaMemcpyHostToDevice, stream), cudaSuccess);
  comm.set_stream(stream);
  EXPECT_EQ(comm.stream(), stream);
  comm.all_reduce(buf.data(), buf.data(), kCount, synk::DataType::float32, synk::ReduceOp::sum);
  comm.set_stream(nullptr);
  buf.copy_to_host(out.data(), bytes);
  EXPECT_TRUE(matches(
      out, kCount, [n](std::size_t i) { return static_cast<double>(n) * (i % 97) + n * (n - 1) / 2; },
      "all_reduce sum on the caller's stream"));
  cudaStreamDestroy(stream);
}
#endif

// ---- DeviceShared's gather, scatter and values by rank (Shared's, in device memory) ----

// On the NCCL device, and on every SYNK_CONTEXTS device (one that is not the NCCL device reaches
// the collectives through staging arrays there).
std::vector<std::string> value_places() {
  std::vector<std::string> places{""};
  for (const std::string& name : synk::context_names()) places.push_back(name);
  return places;
}

TEST(DeviceSharedGather, StacksAndJoinsRanksValuesOnTheDevice) {
  SKIP_WITHOUT_NCCL();
  synk::Communicator& comm = nccl();
  const int r = comm.rank(), n = comm.size(), root = n - 1;
  for (const std::string& place : value_places()) {
    // nd_up 1: every rank [2, 3] of 100 r + i, stacked to [n, 2, 3] at the root.
    const auto mine = [r](std::size_t i) { return 100.0 * r + i; };
    synk::DeviceShared<float> w(comm, "w", iota_values(6, mine), {2, 3}, place);
    synk::DeviceShared<float>::Shape shape;
    const synk::DeviceBuffer stacked = w.gather(1, root, &shape);
    EXPECT_EQ(shape, (std::vector<std::size_t>{static_cast<std::size_t>(n), 2, 3})) << place;
    if (r == root) {
      EXPECT_EQ(stacked.device(), w.device()) << place;
      EXPECT_TRUE(matches(read_back(stacked, 6 * n), 6 * n,
                          [](std::size_t k) { return 100.0 * (k / 6) + k % 6; },
                          "gather nd_up 1 on '" + place + "'"));
    } else {
      EXPECT_EQ(stacked.bytes(), 0u);
    }
    // nd_up 0, unequal rows: rank r holds r + 1 rows of 3; every rank gets them joined.
    w.to_device(iota_values(3 * (r + 1), [r](std::size_t i) { return 1000.0 * r + i; }),
                {static_cast<std::size_t>(r) + 1, 3});
    const synk::DeviceBuffer joined = w.all_gather(0, &shape);
    const std::size_t rows = static_cast<std::size_t>(n * (n + 1) / 2);
    EXPECT_EQ(shape, (std::vector<std::size_t>{rows, 3})) << place;
    EXPECT_EQ(joined.device(), w.device()) << place;
    EXPECT_TRUE(matches(
        read_back(joined, 3 * rows), 3 * rows,
        [](std::size_t k) {
          std::size_t rank = 0, start = 0;  // rank `rank`'s rows begin at row `start`
          while ((start + rank + 1) * 3 <= k) start += ++rank;
          return 1000.0 * rank + (k - start * 3);
        },
        "all_gather nd_up 0 on '" + place + "'"));
  }
  // Stacking values of different shapes is an error on every rank.
  synk::DeviceShared<float> odd(comm, "odd", iota_values(r + 1, [](std::size_t i) { return i; }));
  const auto e = caught([&] { odd.gather(1, 0); });
  if (n > 1) {
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->code(), ErrorCode::InvalidUsage);
    EXPECT_THAT(message(e), ::testing::HasSubstr("DeviceShared 'odd': gather(nd_up=1) stacks"));
  }
}

TEST(DeviceSharedGather, ScatterAndValuesByRank) {
  SKIP_WITHOUT_NCCL();
  synk::Communicator& comm = nccl();
  const int r = comm.rank(), n = comm.size(), last = n - 1;
  for (const std::string& place : value_places()) {
    // The root's [5, 2] split at linspace boundaries: rank r keeps rows [5r/n, 5(r+1)/n).
    synk::DeviceShared<float> w(comm, "w", iota_values(10, [](std::size_t i) { return i + 0.5; }),
                                {5, 2}, place);
    if (r != 0) w.to_device(std::vector<float>{-1.0f});
    w.scatter(0);
    const std::size_t lo = 5 * r / n, hi = 5 * (r + 1) / n;
    EXPECT_EQ(w.shape(), (std::vector<std::size_t>{hi - lo, 2})) << place;
    EXPECT_TRUE(matches(w.to_host(), 2 * (hi - lo),
                        [lo](std::size_t i) { return 2.0 * lo + i + 0.5; },
                        "scatter on '" + place + "'"));

    // get_value: the last rank's value, on every rank, on this value's device.
    w.to_device(iota_values(4, [r](std::size_t i) { return 10.0 * r + i; }), {2, 2});
    synk::DeviceShared<float>::Shape shape;
    const synk::DeviceBuffer got = w.get_value(last, &shape);
    EXPECT_EQ(shape, (std::vector<std::size_t>{2, 2}));
    EXPECT_EQ(got.device(), w.device());
    EXPECT_TRUE(matches(read_back(got, 4), 4, [last](std::size_t i) { return 10.0 * last + i; },
                        "get_value on '" + place + "'"));
    EXPECT_TRUE(matches(w.to_host(), 4, [r](std::size_t i) { return 10.0 * r + i; },
                        "get_value leaves the value"));

    // set_value: the last rank's value becomes rank 0's [3] (the others' arguments are unread).
    const std::vector<float> given = r == 0 ? std::vector<float>{7, 8, 9} : std::vector<float>{};
    w.set_value(last, given, r == 0 ? synk::DeviceShared<float>::Shape{3}
                                    : synk::DeviceShared<float>::Shape{99});
    if (r == last) {
      EXPECT_EQ(w.shape(), (std::vector<std::size_t>{3}));
      EXPECT_TRUE(matches(w.to_host(), 3, [](std::size_t i) { return 7.0 + i; }, "set_value"));
    } else {
      EXPECT_EQ(w.shape(), (std::vector<std::size_t>{2, 2}));
    }
  }
  synk::DeviceShared<float> w(comm, "w", std::vector<float>{1, 2});
  const auto bad_rank = caught([&] { w.get_value(n); });
  ASSERT_TRUE(bad_rank.has_value());
  EXPECT_EQ(bad_rank->code(), ErrorCode::InvalidArgument);
  EXPECT_THAT(message(bad_rank), ::testing::HasSubstr("DeviceShared 'w' get_value: rank"));
  // Rank 0's values do not fill its shape: every rank throws.
  const auto unfilled = caught([&] { w.set_value(0, std::vector<float>{1, 2, 3}, {2, 2}); });
  ASSERT_TRUE(unfilled.has_value());
  EXPECT_EQ(unfilled->code(), ErrorCode::InvalidArgument);
  EXPECT_THAT(message(unfilled), ::testing::HasSubstr("rank 0's values do not fill its shape"));
  EXPECT_TRUE(matches(w.to_host(), 2, [](std::size_t i) { return i + 1.0; }, "still usable"));
}

}  // namespace
