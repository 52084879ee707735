// Function<T>, after Synkhronos's replicated functions: a callable registered under a name on
// every rank, with a collect mode per output. A call splits a batch of Data rows across the
// ranks, runs each rank's share in num_slices pieces, accumulates each output by its mode and
// collects it once to the root (or to every rank). SPMD: every rank makes the same calls.
#pragma once

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "synk/agreement.h"
#include "synk/communicator.h"
#include "synk/data.h"
#include "synk/drive_hook.h"

namespace synk {

// avg: mean over slices, then equal-weight mean over ranks. weighted_avg: each slice's value
// weighed by its row count, so that a body returning a per-row mean gives the exact mean over
// the batch however unevenly it splits (a slice of no rows counts for nothing, even if its
// value is NaN; a batch of no rows gives 0). gather: slices and ranks concatenated in order.
// none: this rank's slices concatenated, not collected.
enum class Collect { avg, sum, prod, min, max, gather, none, weighted_avg };

// T: the element type of the Data inputs; Out: that of the broadcast inputs and the outputs.
template <class T, class Out = T>
struct SliceInputs {
  std::vector<BatchRows<T>> data;  // this slice's rows of each Data input
  const std::vector<std::vector<Out>>* inputs = nullptr;  // the broadcast inputs, whole
  std::size_t rows = 0;  // rows in this slice (may be 0: the body must cope)
};

struct CallOptions {
  Batch batch = Batch::all();
  int num_slices = 1;
  bool to_all = false;  // collect on every rank, not only the root
  int root = 0;
};

template <class T, class Out = T>
class Function {
 public:
  using Outputs = std::vector<std::vector<Out>>;
  using Body = std::function<Outputs(const SliceInputs<T, Out>&)>;

  // weighted_avg needs Out float or double: value x rows overflows narrower types.
  Function(Communicator& comm, std::string name, std::vector<Collect> collect, Body body)
      : comm_(&comm),
        name_(std::move(name)),
        collect_(std::move(collect)),
        body_(std::move(body)),
        weighted_(std::find(collect_.begin(), collect_.end(), Collect::weighted_avg) !=
                  collect_.end()),
        fusable_(std::is_floating_point_v<Out> && collect_.size() <= kFusedOutputs &&
                 std::all_of(collect_.begin(), collect_.end(), [](Collect c) {
                   return c == Collect::avg || c == Collect::sum || c == Collect::weighted_avg;
                 })) {
    constexpr bool wide = std::is_same_v<Out, float> || std::is_same_v<Out, double>;
    if (!wide && weighted_) {
      throw Error(ErrorCode::InvalidArgument, "Function '" + name_ + "': weighted_avg needs float "
                                              "or double outputs (value x rows would overflow "
                                              "a narrower type)");
    }
    // Refused here, not after every rank has run the body (the collective refuses it) or as a
    // silent truncation (local()).
    const bool averages = std::find(collect_.begin(), collect_.end(), Collect::avg) !=
                          collect_.end();
    if (std::is_integral_v<Out> && averages) {
      throw Error(ErrorCode::InvalidArgument, "Function '" + name_ + "': avg needs floating-point "
                                              "outputs (an integer mean would truncate); use sum "
                                              "and divide");
    }
  }

  const std::string& name() const { return name_; }

  // SPMD call: every rank calls with the same arguments. Returns the collected outputs at the
  // root (on every rank with to_all); other ranks get their own accumulated outputs. An
  // exception in the body on any rank becomes a synk::Error on every rank: on a rank whose body
  // failed, its own (a synk::Error keeps its code; any other exception is InvalidUsage), and on
  // the others Remote, naming the first rank that failed.
  Outputs operator()(const std::vector<const Data<T>*>& data,
                     const std::vector<std::vector<Out>>& inputs = {}, const CallOptions& o = {}) {
    if (link_.hook) link_.hook->check_direct_call(name_);
    check_slices(o.num_slices);
    Outputs acc;
    Failure failure;
    std::size_t batch_rows = 0, my_rows = 0;
    try {
      const std::size_t rows = rows_of(data);
      const RowSelection mine = o.batch.for_rank(rows, comm_->rank(), comm_->size());
      // Only for weighted_avg: an index batch's select copies it.
      if (weighted_) batch_rows = o.batch.select(rows).size();
      my_rows = mine.size();
      acc = run_slices(data, inputs, mine, o.num_slices);
    } catch (const Error& e) {
      // A synk error keeps its code on this rank (an index out of range is InvalidArgument);
      // what() already says "synk <code>: ", so only the message after it travels.
      failure = {true, e.code(), e.message()};
    } catch (const std::exception& e) {
      failure = {true, ErrorCode::InvalidUsage, e.what()};
    } catch (...) {
      failure = {true, ErrorCode::InvalidUsage, "an exception that is not a std::exception"};
    }
    bool collected = false;
    if (fuses(o)) {
      collected = agree_and_collect_small(failure, acc, o);
    } else {
      agree(failure, acc);
    }
    if (!collected) collect(acc, o);
    // weighted_avg's sums are divided by the rows they cover: the whole batch's where they were
    // collected, this rank's share elsewhere.
    divide_weighted(acc, o.to_all || comm_->rank() == o.root ? batch_rows : my_rows);
    return acc;
  }

  // This rank alone, over the whole batch; no collective.
  Outputs local(const std::vector<const Data<T>*>& data,
                const std::vector<std::vector<Out>>& inputs = {}, const Batch& batch = Batch::all(),
                int num_slices = 1) {
    check_slices(num_slices);
    const RowSelection sel = batch.select(rows_of(data));
    Outputs acc = run_slices(data, inputs, sel, num_slices);
    divide_weighted(acc, sel.size());
    return acc;
  }

 private:
  // Whether the body failed on this rank, and how. (An empty message used to count as no
  // failure: that rank went on to the reductions alone, and the others waited.)
  struct Failure {
    bool failed = false;
    ErrorCode code = ErrorCode::InvalidUsage;
    std::string text;
  };

  void check_slices(int num_slices) const {
    if (num_slices < 1) {
      throw Error(ErrorCode::InvalidArgument, "Function '" + name_ + "': num_slices " +
                                                  std::to_string(num_slices) + " (at least 1)");
    }
  }

  std::size_t rows_of(const std::vector<const Data<T>*>& data) const {
    if (data.empty()) return 0;
    for (const Data<T>* d : data) {
      if (d->rows() != data[0]->rows()) {
        throw Error(ErrorCode::InvalidArgument, "Function '" + name_ +
                                                    "': Data inputs have different row counts");
      }
    }
    return data[0]->rows();
  }

  Outputs run_slices(const std::vector<const Data<T>*>& data,
                     const std::vector<std::vector<Out>>& inputs, const RowSelection& mine,
                     int num_slices) {
    const std::size_t len = mine.size(), ns = static_cast<std::size_t>(num_slices);
    Outputs acc;
    for (std::size_t k = 0; k < ns; ++k) {
      const RowSelection sel = mine.part(len * k / ns, len * (k + 1) / ns);
      SliceInputs<T, Out> in;
      in.inputs = &inputs;
      in.rows = sel.size();
      for (const Data<T>* d : data) in.data.push_back(d->take(sel));
      Outputs out = body_(in);
      if (out.size() != collect_.size()) {
        throw Error(ErrorCode::InvalidUsage, "Function '" + name_ + "': the body returned " +
                                                 std::to_string(out.size()) + " outputs, " +
                                                 std::to_string(collect_.size()) + " declared");
      }
      weigh_by_rows(out, in.rows);
      if (k == 0) {
        acc = std::move(out);
        continue;
      }
      for (std::size_t j = 0; j < out.size(); ++j) accumulate(j, acc[j], out[j]);
    }
    for (std::size_t j = 0; j < acc.size(); ++j) {
      if (collect_[j] == Collect::avg) {
        for (Out& x : acc[j]) x = static_cast<Out>(x / static_cast<Out>(ns));
      }
    }
    return acc;
  }

  // A weighted_avg output accumulates value x rows until divide_weighted(); a slice of no rows
  // adds zeros (its value may be the NaN of an empty mean).
  void weigh_by_rows(Outputs& out, std::size_t rows) const {
    for (std::size_t j = 0; weighted_ && j < out.size(); ++j) {
      if (collect_[j] != Collect::weighted_avg) continue;
      for (Out& x : out[j]) x = rows ? static_cast<Out>(x * static_cast<Out>(rows)) : Out{};
    }
  }
  void divide_weighted(Outputs& acc, std::size_t rows) const {
    if (!weighted_ || rows == 0) return;
    for (std::size_t j = 0; j < acc.size(); ++j) {
      if (collect_[j] != Collect::weighted_avg) continue;
      for (Out& x : acc[j]) x = static_cast<Out>(x / static_cast<Out>(rows));
    }
  }

  void accumulate(std::size_t j, std::vector<Out>& a, const std::vector<Out>& b) const {
    const Collect c = collect_[j];
    if (c == Collect::gather || c == Collect::none) {
      a.insert(a.end(), b.begin(), b.end());
      return;
    }
    if (a.size() != b.size()) {
      throw Error(ErrorCode::InvalidUsage, "Function '" + name_ + "': output " +
                                               std::to_string(j) + " changed size between slices");
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
      switch (c) {
        case Collect::avg:
        case Collect::weighted_avg:
        case Collect::sum: a[i] = static_cast<Out>(a[i] + b[i]); break;
        case Collect::prod: a[i] = static_cast<Out>(a[i] * b[i]); break;
        case Collect::min: a[i] = std::min(a[i], b[i]); break;
        case Collect::max: a[i] = std::max(a[i], b[i]); break;
        default: break;
      }
    }
  }

  // Every rank learns whether the body failed anywhere, and whether the outputs to reduce have
  // the same size on every rank (else each rank's reduce would be a different call: an error at
  // the root, and the ranks out of step), in one all_reduce (min) of [first failing rank, sizes,
  // negated sizes]; the failing rank's text follows (synk/agreement.h). A rank whose body failed
  // reports its own failure, with its own code; the others name the first rank that failed.
  void agree(const Failure& failure, const Outputs& acc) {
    const std::size_t m = collect_.size();
    constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
    std::vector<std::int64_t> w(1 + 2 * m, kNone);
    w[0] = failure.failed ? comm_->rank() : comm_->size();
    for (std::size_t j = 0; !failure.failed && j < m && j < acc.size(); ++j) {
      w[1 + j] = static_cast<std::int64_t>(acc[j].size());
      w[1 + m + j] = -static_cast<std::int64_t>(acc[j].size());
    }
    comm_->all_reduce(w.data(), w.data(), w.size(), DataType::int64, ReduceOp::min);
    const int first = static_cast<int>(w[0]);
    if (first == comm_->size()) {
      check_reduced_sizes(w);
      return;
    }
    const std::string mine = failure.text.empty() ? "(an exception with no message)" : failure.text;
    const std::string text = text_from(*comm_, first, mine);
    if (failure.failed) {
      throw Error(failure.code, "Function '" + name_ + "': rank " +
                                    std::to_string(comm_->rank()) + " failed: " + mine);
    }
    throw Error(ErrorCode::Remote,
                "Function '" + name_ + "': rank " + std::to_string(first) + " failed: " + text);
  }

  // Whether a call's agreement and its outputs can travel in one all_reduce (sum): outputs of
  // avg, sum and weighted_avg only, of a floating type, a valid root (else collect() reports
  // it), and ranks few enough that the size check below is exact in a float.
  bool fuses(const CallOptions& o) const {
    const int n = comm_->size();
    return fusable_ && n <= 256 && (o.to_all || (o.root >= 0 && o.root < n));
  }

  // The usual call, a loss or an accuracy, returns a few numbers: its agreement and its values
  // then make one collective instead of two (docs/measurements.md, "One collective per call").
  // The all_reduce (sum) adds [ranks that failed, ranks whose outputs exceed kFusedValues, each
  // output's size, its square, the values]; sizes are equal everywhere when n * sum(s^2) ==
  // sum(s)^2. Anything else runs agree() as before, which throws, or returns false for
  // collect() to reduce outputs too large to travel here.
  bool agree_and_collect_small(const Failure& failure, Outputs& acc, const CallOptions& o) {
    const std::size_t m = collect_.size();
    std::array<Out, 2 + 2 * kFusedOutputs + kFusedValues> w{};
    std::size_t total = 0;
    for (std::size_t j = 0; !failure.failed && j < acc.size(); ++j) total += acc[j].size();
    const bool fits = !failure.failed && total <= kFusedValues;
    w[0] = failure.failed ? Out(1) : Out(0);
    w[1] = failure.failed || fits ? Out(0) : Out(1);
    Out* values = &w[2 + 2 * m];
    for (std::size_t j = 0; fits && j < m; ++j) {
      const Out s = static_cast<Out>(acc[j].size());
      w[2 + j] = s;
      w[2 + m + j] = s * s;
      values = std::copy(acc[j].begin(), acc[j].end(), values);
    }
    comm_->all_reduce(w.data(), w.data(), 2 + 2 * m + kFusedValues, data_type_of<Out>(),
                      ReduceOp::sum);
    const Out n = static_cast<Out>(comm_->size());
    bool same = w[0] == Out(0) && w[1] == Out(0);
    for (std::size_t j = 0; same && j < m; ++j) same = n * w[2 + m + j] == w[2 + j] * w[2 + j];
    if (!same) {
      agree(failure, acc);
      return false;
    }
    if (!o.to_all && comm_->rank() != o.root) return true;  // keeps its own, as reduce() does
    const Out* sum = &w[2 + 2 * m];
    for (std::size_t j = 0; j < m; ++j) {
      const Out scale = collect_[j] == Collect::avg ? Out(1) / n : Out(1);
      for (Out& x : acc[j]) x = *sum++ * scale;
    }
    return true;
  }

  // agree()'s sizes: w[1 + j] the smallest and -w[1 + m + j] the largest of output j.
  void check_reduced_sizes(const std::vector<std::int64_t>& w) const {
    const std::size_t m = collect_.size();
    for (std::size_t j = 0; j < m; ++j) {
      if (collect_[j] == Collect::gather || collect_[j] == Collect::none) continue;
      if (w[1 + j] != -w[1 + m + j]) {
        throw Error(ErrorCode::InvalidUsage,
                    "Function '" + name_ + "': output " + std::to_string(j) + " has from " +
                        std::to_string(w[1 + j]) + " to " + std::to_string(-w[1 + m + j]) +
                        " elements across the ranks; an output that is reduced must have the "
                        "same size on every rank");
      }
    }
  }

  // Each output collected by its mode at the root (at every rank with to_all); a rank that does
  // not collect keeps its own.
  void collect(Outputs& acc, const CallOptions& o) {
    const DataType t = data_type_of<Out>();
    for (std::size_t j = 0; j < acc.size(); ++j) {
      std::vector<Out>& v = acc[j];
      ReduceOp op = ReduceOp::sum;
      switch (collect_[j]) {
        case Collect::none: continue;
        case Collect::gather: {
          std::vector<std::size_t> counts(static_cast<std::size_t>(comm_->size()));
          std::size_t mine = v.size();
          comm_->all_gather(&mine, counts.data(), 1, DataType::uint64);
          std::size_t total = 0;
          for (std::size_t c : counts) total += c;
          std::vector<Out> all(comm_->rank() == o.root || o.to_all ? total : 0);
          comm_->gatherv(v.data(), v.size(), all.data(), counts, t, o.root);
          if (o.to_all) comm_->broadcast(all.data(), all.size(), t, o.root);
          if (comm_->rank() == o.root || o.to_all) v = std::move(all);
          continue;
        }
        case Collect::avg: op = ReduceOp::avg; break;
        case Collect::weighted_avg:
        case Collect::sum: op = ReduceOp::sum; break;
        case Collect::prod: op = ReduceOp::prod; break;
        case Collect::min: op = ReduceOp::min; break;
        case Collect::max: op = ReduceOp::max; break;
      }
      if (o.to_all) {
        comm_->all_reduce(v.data(), v.data(), v.size(), t, op);
      } else {
        comm_->reduce(v.data(), v.data(), v.size(), t, op, o.root);
      }
    }
  }

  Communicator* comm_;
  std::string name_;
  std::vector<Collect> collect_;
  Body body_;
  bool weighted_;  // an output is weighted_avg
  static constexpr std::size_t kFusedOutputs = 8, kFusedValues = 16;
  bool fusable_;  // every output is small enough in kind for agree_and_collect_small
  detail::DriveLink link_;  // set on the master while a Distributed serves

  friend class Distributed;  // sets link_ (synk/distribute.h)
};

}  // namespace synk
