// Master-driven mode under mpiexec: the master's serial program drives Function calls and
// Shared collectives on every rank; a body that throws on a worker reaches the master naming
// that rank, and the workers keep serving until close().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../multirank/mpi_test.h"
#include "synk/distribute.h"

namespace synk {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using synk_test::caught;
using synk_test::message;
using synk_test::world;

TEST(Distribute, TheWalkthroughDrivenByTheMaster) {
  Communicator& comm = world();
  const int n = comm.size();
  Shared<float> s(comm, "s", {1, 1});
  Data<float> x(comm, {4, 2});
  x.set_value(comm.rank() == 0 ? std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4} : std::vector<float>{});
  int calls_here = 0;
  Function<float> update(comm, "update", {Collect::sum}, [&](const SliceInputs<float>& in) {
    ++calls_here;
    std::vector<float> next(2, 0.0f);
    for (std::size_t r = 0; r < in.rows; ++r) {
      for (std::size_t c = 0; c < 2; ++c) next[c] += in.data[0].values[r * 2 + c] * s.value()[c];
    }
    s.value() = next;
    return Function<float>::Outputs{{static_cast<float>(in.rows)}};
  });
  Function<float> fragile(comm, "fragile", {Collect::avg}, [&](const SliceInputs<float>&) {
    if (comm.rank() == n - 1 && n > 1) throw std::runtime_error("worker disk full");
    return Function<float>::Outputs{{1.0f}};
  });

  Distributed dist(comm);
  dist.add(update);
  dist.add(fragile);
  dist.add("x", x);
  dist.add(s);
  if (dist.serve()) {  // the master's serial program; workers are inside serve() meanwhile
    const auto rows = dist.call(update, {"x"});
    EXPECT_THAT(rows[0], ElementsAre(4.0f));  // every row once, summed over the ranks
    dist.all_reduce("s", ReduceOp::sum);
    EXPECT_THAT(s.value(), ElementsAre(10.0f, 10.0f));  // colsum(x) whatever the split
    const std::vector<float> all = s.gather();
    EXPECT_EQ(all, std::vector<float>(static_cast<std::size_t>(2 * n), 10.0f));
    if (n > 1) {
      const auto e = caught([&] { dist.call(fragile, {"x"}); });
      EXPECT_SYNK_ERROR(e, ErrorCode::Remote);
      EXPECT_THAT(message(e), HasSubstr("Function 'fragile': rank " + std::to_string(n - 1) +
                                        " failed: worker disk full"));
    }
    // The job is still usable: a call on an index batch, sliced.
    s.set_local({1, 1});
    dist.broadcast("s");
    const auto again = dist.call(update, {"x"}, {}, Batch::indices({3, 2, 1}), 2);
    EXPECT_THAT(again[0], ElementsAre(3.0f));
    dist.close();
  }
  // Every rank took part: the workers ran their shares too.
  int total = 0;
  MPI_Allreduce(&calls_here, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(total, 3 * n);  // first call: 1 slice per rank; last call: 2 slices per rank
}

// The master scatters s, then sets the last rank's value and reads it back.
void master_scatters_and_sets_a_shared(Shared<float>& s, int n) {
  const int last = n - 1;
  // Scatter rows 0..5 of the master's value: rank r keeps its linspace share.
  s.set_local({0, 1, 2, 3, 4, 5}, {6});
  s.scatter();
  std::vector<std::size_t> shape;
  const std::vector<float> share = s.get_value(last, &shape);
  const std::size_t lo = 6 * static_cast<std::size_t>(last) / static_cast<std::size_t>(n);
  EXPECT_EQ(shape, (std::vector<std::size_t>{6 - lo}));
  EXPECT_EQ(share.front(), static_cast<float>(lo));
  s.set_value(last, {42, 43});
  EXPECT_THAT(s.get_value(last), ElementsAre(42.0f, 43.0f));
  std::vector<std::size_t> joined;
  EXPECT_EQ(s.all_gather(0, &joined).back(), 43.0f);
}

// The Data, after serve(): the master gives x new values, a new size and a loader, calls total
// on it, and scatters s from it; the last rank's s ends as {42, 43}.
void master_changes_the_data(Distributed& dist, Function<float>& total, Data<float>& x,
                             Shared<float>& s, int n) {
  const int last = n - 1;
  x.set_value(std::vector<float>{5, 5, 5, 5});
  EXPECT_THAT(dist.call(total, {"x"})[0], ElementsAre(20.0f));
  x.resize(6);
  x.load([](float* p) {
    for (int i = 0; i < 6; ++i) p[i] = 10.0f;
  });
  EXPECT_THAT(dist.call(total, {"x"})[0], ElementsAre(60.0f));
  // Scatter from the Data: each rank takes its share of the batch's rows from the segment.
  s.scatter(x, Batch::first(4));
  std::vector<std::size_t> shape;
  const std::vector<float> part = s.get_value(last, &shape);
  const std::size_t first = 4 * static_cast<std::size_t>(last) / static_cast<std::size_t>(n);
  EXPECT_EQ(shape, (std::vector<std::size_t>{4 - first, 1}));
  EXPECT_EQ(part, std::vector<float>(4 - first, 10.0f));
  s.set_value(last, {42, 43});
}

// Fresh arrays in a call: the master passes total arrays of its own instead of a Data.
void master_calls_on_fresh_arrays(Distributed& dist, Function<float>& total) {
  const std::vector<float> fresh{1, 2, 3, 4, 5, 6, 7};
  DrivenCall<float> c;
  c.arrays = {Rows<float>{fresh, {}}};
  c.batch = Batch::first(5);
  EXPECT_THAT(dist.call(total, c)[0], ElementsAre(15.0f));
  c.arrays = {Rows<float>{std::span<const float>(fresh).first(3), {3, 1}}};
  c.batch = Batch::all();
  EXPECT_THAT(dist.call(total, c)[0], ElementsAre(6.0f));
}

// The master's program of issue 37: two Functions of different types, a Shared scattered,
// set on rank 1 and read back, and a Data changed, resized, loaded and passed fresh after
// serve(), all from the master alone.
TEST(Distribute, TheMasterDrivesEveryKindOfRequestAlone) {
  Communicator& comm = world();
  const int n = comm.size(), last = n - 1;
  Data<float> x(comm, {4, 1});
  x.set_value(comm.rank() == 0 ? std::vector<float>{1, 2, 3, 4} : std::vector<float>{});
  Data<std::uint8_t> pixels(comm, {3, 2});
  pixels.set_value(comm.rank() == 0 ? std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6}
                                    : std::vector<std::uint8_t>{});
  Shared<float> s(comm, "s", {0});
  // Sums of rows, and the mean pixel of each row in double.
  Function<float> total(comm, "total", {Collect::sum}, [](const SliceInputs<float>& in) {
    float sum = 0;
    for (float v : in.data[0].values) sum += v;
    return Function<float>::Outputs{{sum}};
  });
  Function<std::uint8_t, double> mean(
      comm, "mean", {Collect::weighted_avg}, [](const SliceInputs<std::uint8_t, double>& in) {
        double sum = 0;
        for (std::uint8_t v : in.data[0].values) sum += v;
        return Function<std::uint8_t, double>::Outputs{{sum / static_cast<double>(in.rows * 2)}};
      });
  Distributed dist(comm);
  dist.add(total);
  dist.add(mean);
  dist.add("x", x, [](float* p) {
    for (int i = 0; i < 6; ++i) p[i] = 10.0f;  // whichever node's local rank 0 runs it
  });
  dist.add("pixels", pixels);
  dist.add(s);
  if (dist.serve()) {
    EXPECT_THAT(dist.call(mean, {"pixels"})[0], ElementsAre(3.5));
    EXPECT_THAT(dist.call(total, {"x"})[0], ElementsAre(10.0f));
    master_scatters_and_sets_a_shared(s, n);
    master_changes_the_data(dist, total, x, s, n);
    master_calls_on_fresh_arrays(dist, total);
    // A bad rank is an error on the master; the workers keep serving.
    const auto e = caught([&] { s.get_value(n); });
    EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
    EXPECT_THAT(message(e), HasSubstr("get_value: rank " + std::to_string(n) + " is out of range"));
    EXPECT_EQ(s.get_value(0), s.value());
    dist.close();
  }
  // Every rank: the master's changes reached it.
  EXPECT_EQ(x.rows(), 6u);
  EXPECT_EQ(x.data()[5], 10.0f);
  if (comm.rank() == last) {
    EXPECT_THAT(s.value(), ElementsAre(42.0f, 43.0f));
  }
  // After close(), the collectives are SPMD again.
  s.set_local({1});
  s.all_reduce(ReduceOp::sum);
  EXPECT_THAT(s.value(), ElementsAre(static_cast<float>(n)));
}

struct Pixel {
  std::uint8_t r, g, b;
};

// Types are part of a name: a Data of another element type on one rank fails serve() on every
// rank, and a Function that reads a Data of another type fails its call before any request.
TEST(Distribute, TypesAreCheckedAtServeAndAtCall) {
  Communicator& comm = world();
  Data<float> x(comm, {2, 1});
  Data<double> y(comm, {2, 1});
  Function<float> f(comm, "f", {Collect::sum},
                    [](const SliceInputs<float>&) { return Function<float>::Outputs{{1.0f}}; });
  {
    Distributed dist(comm);
    dist.add(f);
    dist.add("y", y);
    if (comm.size() > 1 && comm.rank() == 1) {
      dist.add("x", y);  // double where rank 0 has float
    } else {
      dist.add("x", x);
    }
    if (comm.size() > 1) {
      const auto e = caught([&] { dist.serve(); });
      EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
      EXPECT_THAT(message(e), HasSubstr("rank 1 has Data 'x' (float64) that rank 0 has not; "
                                        "lacks Data 'x' (float32)"));
    }
  }
  Data<Pixel> pixels(comm, {2, 1});
  Distributed dist(comm);
  dist.add(f);
  dist.add("y", y);
  dist.add("pixels", pixels);
  if (dist.serve()) {
    const auto e = caught([&] { dist.call(f, {"y"}); });
    EXPECT_SYNK_ERROR(e, ErrorCode::InvalidArgument);
    EXPECT_THAT(message(e), HasSubstr("Function 'f' reads float32 rows, but Data 'y' is (float64)"));
    const auto odd = caught([&] { dist.call(f, {"pixels"}); });
    EXPECT_SYNK_ERROR(odd, ErrorCode::InvalidArgument);
    EXPECT_THAT(message(odd), HasSubstr("but Data 'pixels' is (synk::(anonymous namespace)::Pixel)"));
    EXPECT_THAT(dist.call(f)[0], ElementsAre(static_cast<float>(comm.size())));
    dist.close();
  }
}

// Misuse is an error at once, never a hang: a driven call from inside a Function body (the
// workers are in that body), a change to a Data added read only, an add() after serve() or of
// a name twice. The job stays usable, and a worker's close() after serve() does nothing.
TEST(Distribute, MisuseIsAnErrorAtOnce) {
  Communicator& comm = world();
  Data<float> x(comm, {2, 1});
  x.set_value(comm.rank() == 0 ? std::vector<float>{1, 2} : std::vector<float>{});
  const Data<float>& fixed = x;
  Shared<float> s(comm, "s", {1});
  Distributed dist(comm);
  Function<float> inner(comm, "inner", {Collect::sum},
                        [](const SliceInputs<float>&) { return Function<float>::Outputs{{1.0f}}; });
  Function<float> outer(comm, "outer", {Collect::sum}, [&](const SliceInputs<float>&) {
    dist.call(inner);
    return Function<float>::Outputs{{1.0f}};
  });
  dist.add(inner);
  dist.add(outer);
  dist.add("x", fixed);
  dist.add(s);
  const auto twice = caught([&] { dist.add(s); });
  EXPECT_SYNK_ERROR(twice, ErrorCode::InvalidArgument);
  EXPECT_THAT(message(twice), HasSubstr("a Shared named 's' was added already"));
  if (dist.serve()) {
    const auto nested = caught([&] { dist.call(outer, {"x"}); });
    EXPECT_SYNK_ERROR(nested, ErrorCode::InvalidUsage);
    EXPECT_THAT(message(nested), HasSubstr("is made inside another request"));
    const auto change = caught([&] { x.set_value(std::vector<float>{3, 4}); });
    EXPECT_SYNK_ERROR(change, ErrorCode::InvalidUsage);
    EXPECT_THAT(message(change), HasSubstr("Data 'x' was added read only (const)"));
    Shared<float> late(comm, "late", {1});
    const auto after = caught([&] { dist.add(late); });
    EXPECT_SYNK_ERROR(after, ErrorCode::InvalidUsage);
    EXPECT_THAT(message(after), HasSubstr("add() of Shared 'late' comes before serve()"));
    EXPECT_THAT(dist.call(inner, {"x"})[0], ElementsAre(static_cast<float>(comm.size())));
    // Called directly, as Synkhronos's master did: it waited for the workers until
    // SYNK_TIMEOUT, and the communicator was broken after.
    const auto direct = caught([&] { inner({&x}); });
    if (comm.size() > 1) {
      EXPECT_SYNK_ERROR(direct, ErrorCode::InvalidUsage);
      EXPECT_THAT(message(direct), HasSubstr("Function 'inner': on the master between serve() "
                                             "and close(), call it as Distributed::call"));
    } else {
      EXPECT_FALSE(direct.has_value());  // no workers: nothing would wait
    }
    EXPECT_THAT(dist.call(inner, {"x"})[0], ElementsAre(static_cast<float>(comm.size())));
    dist.close();
  } else {
    EXPECT_FALSE(caught([&] { dist.close(); }).has_value());  // SPMD-style close: nothing
  }
  EXPECT_EQ(x.data()[1], 2.0f);
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// A gather, or a reduction returned, to a worker would give the master nothing: it is refused
// on the master before anything is sent, and the job goes on.
TEST(Distribute, AResultForAWorkerIsRefused) {
  Communicator& comm = world();
  Shared<float> s(comm, "s", {static_cast<float>(comm.rank())});
  Distributed dist(comm);
  dist.add(s);
  if (dist.serve()) {
    if (comm.size() > 1) {
      const auto gathered = caught([&] { s.gather(1, 1); });
      EXPECT_SYNK_ERROR(gathered, ErrorCode::InvalidArgument);
      EXPECT_THAT(message(gathered), HasSubstr("gather of Shared 's' to root 1: in master-driven "
                                               "mode the result goes to the master (root 0)"));
      const auto reduced = caught([&] { s.reduced(ReduceOp::sum, comm.size() - 1); });
      EXPECT_SYNK_ERROR(reduced, ErrorCode::InvalidArgument);
      EXPECT_THAT(message(reduced), HasSubstr("reduced of Shared 's' to root"));
    }
    std::vector<float> ranks(static_cast<std::size_t>(comm.size()));
    for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<float>(r);
    EXPECT_EQ(s.gather(1, 0), ranks);
    dist.close();
  }
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// A scatter from a Data makes no collective: where a worker's Data of that name has fewer rows
// than the master's, its failure reaches the master (Remote, naming it) and the workers go on
// serving. (It was dropped: the master's call returned as if every rank had its rows.)
TEST(Distribute, AWorkersFailedScatterFromADataReachesTheMaster) {
  Communicator& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs a worker";
  Data<float> x(comm, {6, 1});
  Data<float> shorter(comm, {2, 1});
  Shared<float> s(comm, "s", {0});
  Distributed dist(comm);
  dist.add("x", comm.rank() == comm.size() - 1 ? shorter : x);  // same name and type
  dist.add(s);
  if (dist.serve()) {
    const auto e = caught([&] { s.scatter(x, Batch::all()); });
    EXPECT_SYNK_ERROR(e, ErrorCode::Remote);
    EXPECT_THAT(message(e), HasSubstr("distribute: rank " + std::to_string(comm.size() - 1) +
                                      " failed: "));
    EXPECT_THAT(message(e), HasSubstr("out of range"));
    s.broadcast(std::vector<float>{7});  // still serving
    EXPECT_THAT(s.get_value(comm.size() - 1), ElementsAre(7.0f));
    dist.close();
  }
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// A request larger than one packet (2,048 bytes): inputs of 1,000 floats and an index batch of
// 600 rows travel whole, in the packet and the broadcast after it, and the same on every rank.
TEST(Distribute, ALargeRequestArrivesWhole) {
  Communicator& comm = world();
  const int n = comm.size();
  constexpr std::size_t kRows = 600;
  Data<float> x(comm, {kRows, 1});
  std::vector<float> rows(kRows);
  for (std::size_t r = 0; r < kRows; ++r) rows[r] = static_cast<float>(r);
  x.set_value(comm.rank() == 0 ? rows : std::vector<float>{});
  // Each rank returns the sum of its rows and of the inputs it received.
  Function<float> sums(comm, "sums", {Collect::sum, Collect::sum}, [](const SliceInputs<float>& in) {
    float row_sum = 0, input_sum = 0;
    for (std::size_t r = 0; r < in.rows; ++r) row_sum += in.data[0].values[r];
    for (const auto& v : *in.inputs) {
      for (float f : v) input_sum += f;
    }
    return Function<float>::Outputs{{row_sum}, {input_sum}};
  });
  Distributed dist(comm);
  dist.add(sums);
  dist.add("x", x);
  if (dist.serve()) {
    const std::vector<std::vector<float>> inputs{std::vector<float>(1000, 0.5f), {1, 2, 3}};
    std::vector<std::size_t> picked(kRows);
    for (std::size_t r = 0; r < kRows; ++r) picked[r] = kRows - 1 - r;  // every row, reversed
    const auto out = dist.call(sums, {"x"}, inputs, Batch::indices(picked));
    EXPECT_THAT(out[0], ElementsAre(static_cast<float>(kRows * (kRows - 1) / 2)));
    EXPECT_THAT(out[1], ElementsAre(static_cast<float>(n * (500 + 6))));
    dist.close();
  }
}

// Runs `session`, a Distributed's life that throws std::runtime_error on the master once it
// serves and returns true on a worker whose serve() returned: the master alone fails, with its
// own error, and the communicator works after.
void expect_the_master_alone_fails(Communicator& comm, const std::function<bool()>& session,
                                   const std::string& error_text) {
  bool served = false;
  const auto e = caught([&] {
    try {
      served = session();
    } catch (const std::runtime_error& error) {
      throw Error(ErrorCode::InvalidUsage, error.what());
    }
  });
  if (comm.rank() == 0) {
    EXPECT_THAT(message(e), HasSubstr(error_text));
  } else {
    EXPECT_FALSE(e.has_value());
    EXPECT_TRUE(served);
  }
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// The master's program fails and unwinds past its Distributed without close(): the workers
// waited in serve() for a request forever (and the master then in MPI_Finalize for them). Its
// destructor closes, so the workers' serve() returns and every rank goes on.
TEST(Distribute, AMasterThatUnwindsWithoutCloseReleasesTheWorkers) {
  Communicator& comm = world();
  Function<float> f(comm, "f", {Collect::sum},
                    [](const SliceInputs<float>&) { return Function<float>::Outputs{{1.0f}}; });
  expect_the_master_alone_fails(comm, [&] {
    Distributed dist(comm);
    dist.add(f);
    if (dist.serve()) {
      EXPECT_THAT(dist.call(f)[0], ElementsAre(static_cast<float>(comm.size())));
      throw std::runtime_error("the master's loop failed");
    }
    return true;
  }, "the master's loop failed");
}

// The same with the objects declared after the Distributed, so destroyed before it: its
// destructor wrote into them (a heap use-after-free; a double free on the master), and the
// master's own exception was lost.
TEST(Distribute, AMasterThatUnwindsPastObjectsMadeAfterItsDistributed) {
  Communicator& comm = world();
  expect_the_master_alone_fails(comm, [&] {
    Distributed dist(comm);
    Data<float> x(comm, {3, 1});
    Shared<float> s(comm, "a_shared_variable_with_a_name_past_the_small_string", {1});
    Function<float> f(comm, "f", {Collect::sum},
                      [](const SliceInputs<float>&) { return Function<float>::Outputs{{1.0f}}; });
    dist.add(f);
    dist.add("x", x);
    dist.add(s);
    if (dist.serve()) {
      s.all_reduce();
      throw std::runtime_error("the master's own bug");
    }
    return true;
  }, "the master's own bug");
}

// Requests out of place are errors at once, on the rank that made them (they waited for ranks
// that were not listening: a worker's forever, the master's until SYNK_TIMEOUT).
TEST(Distribute, RequestsOutsideServeAndCloseAreErrorsAtOnce) {
  Communicator& comm = world();
  Shared<float> s(comm, "s", {1});
  Function<float> f(comm, "f", {Collect::sum},
                    [](const SliceInputs<float>&) { return Function<float>::Outputs{{1.0f}}; });
  Distributed dist(comm);
  dist.add(f);
  dist.add(s);
  auto expect_usage = [](const std::function<void()>& request, const std::string& text) {
    const auto e = caught(request);
    EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
    EXPECT_THAT(message(e), HasSubstr(text));
  };
  expect_usage([&] { dist.call(f); },
               comm.rank() == 0 ? "call comes after serve()" : "call is for the master");
  if (dist.serve()) {
    EXPECT_THAT(dist.call(f)[0], ElementsAre(static_cast<float>(comm.size())));
    dist.close();
    dist.close();  // a second close does nothing
    expect_usage([&] { dist.all_reduce("s"); }, "all_reduce comes before close()");
  } else {
    expect_usage([&] { dist.call(f); }, "call is for the master (rank 0)");
    expect_usage([&] { dist.all_reduce("s"); }, "is for the master");
  }
  expect_usage([&] { dist.serve(); }, "serve() is called once");
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// The master's own collectives between serve() and close(), outside a request: the workers
// serve requests and never join them, so each waited until SYNK_TIMEOUT (and the timed-out
// communicator was broken after). They are refused at once; inside a Function's body, where
// every rank runs them, and after close() they run.
TEST(Distribute, TheMastersOwnCollectivesAreRefusedWhileItDrives) {
  Communicator& comm = world();
  const float n = static_cast<float>(comm.size());
  Function<float> f(comm, "f", {Collect::sum}, [&](const SliceInputs<float>&) {
    std::vector<float> one{1.0f};
    comm.all_reduce(one);  // every rank is in the request
    return Function<float>::Outputs{{one[0]}};
  });
  Distributed dist(comm);
  dist.add(f);
  if (dist.serve()) {
    std::vector<float> v{1.0f};
    const auto blocking = caught([&] { comm.all_reduce(v); });
    const auto started = caught([&] { comm.iall_reduce(v).wait(); });
    const auto split = caught([&] { (void)comm.split(0, 0); });
    if (comm.size() > 1) {
      for (const auto& e : {blocking, started}) {
        EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
        EXPECT_THAT(message(e), HasSubstr("all_reduce on the master between serve() and "
                                          "close(), outside a request"));
      }
      EXPECT_SYNK_ERROR(split, ErrorCode::InvalidUsage);
      EXPECT_THAT(message(split), HasSubstr("split on the master between serve()"));
    } else {  // no workers: nothing would wait
      EXPECT_FALSE(blocking.has_value());
      EXPECT_FALSE(started.has_value());
      EXPECT_FALSE(split.has_value());
    }
    EXPECT_THAT(dist.call(f)[0], ElementsAre(n * n));
    dist.close();
  }
  EXPECT_TRUE(synk_test::still_usable(comm));
}

// A name registered on some ranks only: serve() fails on every rank naming it (a request for
// it left the master waiting for SYNK_TIMEOUT while the worker dropped the error).
TEST(Distribute, DifferentRegistrationsAreAnErrorInServeOnEveryRank) {
  Communicator& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs ranks that differ";
  const int odd = comm.size() - 1;
  Function<float> f(comm, "f", {Collect::sum},
                    [](const SliceInputs<float>&) { return Function<float>::Outputs{{1.0f}}; });
  Function<float> g(comm, "only_elsewhere", {Collect::sum},
                    [](const SliceInputs<float>&) { return Function<float>::Outputs{{1.0f}}; });
  Shared<float> w(comm, "w", {1});
  Distributed dist(comm);
  dist.add(f);
  if (comm.rank() != odd) dist.add(g);
  if (comm.rank() == odd) dist.add(w);
  const auto e = caught([&] { dist.serve(); });
  EXPECT_SYNK_ERROR(e, ErrorCode::InvalidUsage);
  EXPECT_THAT(message(e), HasSubstr("every rank must add() the same Functions, Data and Shared "
                                    "variables; rank " + std::to_string(odd) +
                                    " has Shared 'w' (float32) that rank 0 has not; lacks "
                                    "Function 'only_elsewhere' (float32 -> float32)"));
  EXPECT_TRUE(synk_test::still_usable(comm));
}

}  // namespace
}  // namespace synk
