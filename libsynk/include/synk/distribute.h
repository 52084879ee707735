// Master-driven mode, the Synkhronos way: the training loop is written once, as a serial
// program on rank 0; the other ranks serve its Function calls and Shared collectives until
// close(). Functions, Data and Shared variables are registered under the same names on every
// rank before serve(). A body that throws on a worker reaches the master as a synk::Error naming
// that rank, and the workers keep serving. A rank that dies ends the job's driving: the master's
// call throws Error(Remote) naming it, and so does serve() on the other workers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "synk/agreement.h"
#include "synk/data.h"
#include "synk/function.h"
#include "synk/shared.h"

namespace synk {

namespace detail {
// The pids of the other ranks on this node, so that waits on MPI, which cannot tell a dead peer
// from a slow one, can. (Ranks on other nodes are covered by the deadline and by mpirun.)
class PeerWatch {
 public:
  // Collective over comm.
  void start(Communicator& comm);
  // The watched ranks whose processes have ended, as "rank 2 (pid 1234) died" (every one of
  // them: a survivor that left on seeing the first may have ended too), or "". A kill() and a
  // read of /proc per peer: for waits that have already lasted a while, and for errors.
  std::string deaths() const;

 private:
  // Per rank; 0: not watched (this rank, another node, another PID namespace).
  std::vector<long long> pids_;
};

// A request of the master, as every rank receives it. Inputs travel as bytes: the layout is
// src/data/request_wire.cc's, one for every T.
struct DriveRequest {
  enum class Kind : std::int32_t { call, all_reduce, reduce, broadcast, gather, close };
  Kind kind = Kind::close;
  std::int32_t num_slices = 1, arg = 0, op = 0;
  std::string name;
  std::vector<std::string> data;
  std::vector<std::vector<unsigned char>> inputs;
  RowSelection selection;
};
// The master (rank 0) sends a request, which every other rank receives: one polled broadcast
// of a fixed-size packet, so a small request is a single broadcast, and a synk broadcast of the
// rest of a larger one. Error(Remote) names a rank of this node that died; the master's send
// throws Error(Timeout) after SYNK_TIMEOUT. After a throw no later request can follow.
void send_request(Communicator& comm, const DriveRequest& request, const PeerWatch& watch);
DriveRequest receive_request(Communicator& comm, const PeerWatch& watch);
}  // namespace detail

template <class T>
class Distributed {
 public:
  explicit Distributed(Communicator& comm) : comm_(&comm) {}
  // On the master, one still serving (an exception unwound the master's program before its
  // close()) closes: the workers leave serve() instead of waiting for a request forever, and
  // the master with them in MPI_Finalize. Not after a request that failed on the master alone
  // (see drive()): the workers may still be inside it, and a close would meet them there. A
  // destructor does not throw: a close that fails is dropped (the workers then end as a lost
  // master leaves them: by mpirun).
  ~Distributed() {
    if (comm_->rank() != 0 || state_ != State::serving || !failure_.empty() || in_request_) return;
    try {
      close();
    } catch (...) {
    }
  }
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  void add(Function<T>& f) { functions_[f.name()] = &f; }
  void add(const std::string& name, const Data<T>& d) { data_[name] = &d; }
  void add(Shared<T>& s) { shared_[s.name()] = &s; }

  bool is_master() const { return comm_->rank() == 0; }

  // Collective: every rank calls it. First every rank checks that all registered the same
  // Functions, Data and Shared names (else InvalidUsage on every rank naming the difference: a
  // request for a name a worker lacked left the master waiting for SYNK_TIMEOUT). On a worker:
  // serves the master's requests, returns when the master calls close(); throws Error(Remote)
  // naming a rank of this node that died. On the master: returns at once. Returns is_master().
  bool serve() {
    if (state_ != State::setup) {
      throw Error(ErrorCode::InvalidUsage, "distribute: serve() is called once per Distributed");
    }
    watch_.start(*comm_);
    check_same_names();
    state_ = State::serving;
    if (is_master()) return true;
    for (;;) {
      Message m = receive();
      if (m.kind == Kind::close) {
        state_ = State::closed;
        return false;
      }
      try {
        execute(m);
      } catch (const Error& e) {
        // A body that threw: the master got the error too (every rank fails a call together),
        // so keep serving. A rank that died: nobody can finish a call any more.
        throw_if_peer_died(e);
      }
    }
  }

  // On the master: runs function `name` on every rank (see Function::operator()), with the
  // batch resolved against the first Data input's rows.
  typename Function<T>::Outputs call(const std::string& name, const std::vector<std::string>& data,
                                     const std::vector<std::vector<T>>& inputs = {},
                                     const Batch& batch = Batch::all(), int num_slices = 1) {
    check_driving("call");
    Message m;
    m.kind = Kind::call;
    m.name = name;
    m.data = data;
    m.inputs = to_bytes(inputs);
    m.num_slices = num_slices;
    const Data<T>* first = data.empty() ? nullptr : &find(data_, data[0], "Data");
    m.selection = batch.select(first ? first->rows() : 0);
    return drive(m);
  }
  // On the master: a collective on Shared variable `name` over every rank.
  void all_reduce(const std::string& name, ReduceOp op = ReduceOp::avg) { shared_op(name, Kind::all_reduce, op); }
  void reduce(const std::string& name, ReduceOp op = ReduceOp::avg) { shared_op(name, Kind::reduce, op); }
  void broadcast(const std::string& name) { shared_op(name, Kind::broadcast, ReduceOp::sum); }
  std::vector<T> gather(const std::string& name, int nd_up = 1) {
    check_driving("gather");
    Message m;
    m.kind = Kind::gather;
    m.name = name;
    m.arg = nd_up;
    std::vector<T> out;
    drive(m, [&] { out = find(shared_, name, "Shared").gather(nd_up); });
    return out;
  }
  // On the master: the workers leave serve(). After a rank died it does nothing: the workers
  // left serve() by themselves.
  void close() {
    if (!is_master()) check_driving("close");  // throws: workers leave serve() by themselves
    if (!failure_.empty() || state_ == State::closed) return;  // a second close does nothing
    check_driving("close");
    Message m;
    m.kind = Kind::close;
    state_ = State::closed;
    send(m);
  }

 private:
  using Kind = detail::DriveRequest::Kind;
  using Message = detail::DriveRequest;

  template <class M>
  static auto& find(M& map, const std::string& name, const char* what) {
    auto it = map.find(name);
    if (it == map.end()) {
      throw Error(ErrorCode::InvalidArgument, std::string("distribute: no ") + what + " '" + name + "'");
    }
    return *it->second;
  }

  // Requests come from the master, between serve() and close(): anything else would wait for
  // ranks that are not listening (a worker's request hung; the master's before serve() or after
  // close() ran into SYNK_TIMEOUT).
  void check_driving(const char* what) const {
    std::string why;
    if (!failure_.empty() && state_ == State::setup) {
      why = "cannot follow a serve() that failed (" + failure_ + ")";
    } else if (!is_master()) {
      why = "is for the master (rank 0); rank " + std::to_string(comm_->rank()) +
            " serves its requests in serve()";
    } else if (state_ == State::setup) {
      why = "comes after serve() (which every rank calls, the master included)";
    } else if (state_ == State::closed) {
      why = "comes before close(): the workers have left serve()";
    }
    if (!why.empty()) throw Error(ErrorCode::InvalidUsage, std::string("distribute: ") + what + " " + why);
  }

  // The registered names, one per line, kind first, sorted (the maps are ordered).
  std::string names() const {
    std::string text;
    for (const auto& f : functions_) text += "Function '" + f.first + "'\n";
    for (const auto& d : data_) text += "Data '" + d.first + "'\n";
    for (const auto& s : shared_) text += "Shared '" + s.first + "'\n";
    return text;
  }
  // Collective. Every rank compares its names with rank 0's; where any differs, the lowest
  // such rank tells every rank what it has that rank 0 has not, and the other way.
  void check_same_names() {
    const std::string mine = names();
    const std::string zero_names = text_from(*comm_, 0, mine);
    const bool differs = mine != zero_names;
    const std::optional<RankFailure> odd = first_failure(
        *comm_, differs, differs ? names_differ(lines_of(zero_names), lines_of(mine)) : "");
    if (!odd) return;
    failure_ = "the ranks registered different names";
    throw Error(ErrorCode::InvalidUsage,
                "distribute: serve(): every rank must add() the same Functions, Data and Shared "
                "variables; rank " + std::to_string(odd->rank) + " " + odd->text);
  }
  static std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::size_t pos = 0, nl;
    while ((nl = text.find('\n', pos)) != std::string::npos) {
      out.push_back(text.substr(pos, nl - pos));
      pos = nl + 1;
    }
    return out;
  }
  // What `own` has that rank 0's `theirs` has not, and the other way.
  static std::string names_differ(const std::vector<std::string>& theirs,
                                  const std::vector<std::string>& own) {
    std::string extra, missing;
    for (const std::string& s : own) {
      if (std::find(theirs.begin(), theirs.end(), s) == theirs.end()) extra += " " + s;
    }
    for (const std::string& s : theirs) {
      if (std::find(own.begin(), own.end(), s) == own.end()) missing += " " + s;
    }
    return (extra.empty() ? "" : "has" + extra + " that rank 0 has not") +
           (extra.empty() || missing.empty() ? "" : "; ") +
           (missing.empty() ? "" : "lacks" + missing);
  }

  void shared_op(const std::string& name, Kind k, ReduceOp op) {
    check_driving(k == Kind::all_reduce ? "all_reduce" : k == Kind::reduce ? "reduce" : "broadcast");
    Message m;
    m.kind = k;
    m.name = name;
    m.op = static_cast<std::int32_t>(op);
    drive(m);
  }

  // The master's side of every request: send it, run it here (or run `here`). Once a rank has
  // died every later request fails at once, since no collective can complete.
  template <class Here>
  void drive(const Message& m, Here&& here) {
    if (!failure_.empty()) {
      throw Error(ErrorCode::InvalidUsage,
                  "distribute: " + failure_ + " earlier; this job's ranks cannot be driven any more");
    }
    // Every rank fails a request's collectives together (a body that threw anywhere, a
    // mismatch: the workers then keep serving, see serve()), except where this rank waited past
    // SYNK_TIMEOUT alone, or failed with something other than a synk::Error (no memory):
    // then the request may still be under way on the workers.
    in_request_ = true;
    try {
      send(m);
      here();
    } catch (const Error& e) {
      throw_if_peer_died(e);
      if (e.code() != ErrorCode::Timeout) in_request_ = false;
      throw;
    }
    in_request_ = false;
  }
  typename Function<T>::Outputs drive(const Message& m) {
    typename Function<T>::Outputs out;
    drive(m, [&] { out = execute(m); });
    return out;
  }

  // After `e`: when a watched rank has died, remembers it and throws Error(Remote) naming it
  // (a wait on the shm group already says so; one on MPI may have failed otherwise).
  void throw_if_peer_died(const Error& e) {
    std::string deaths = watch_.deaths();
    if (deaths.empty()) return;
    failure_ = std::move(deaths);
    if (e.code() == ErrorCode::Remote &&
        std::string(e.what()).find(failure_) != std::string::npos) {
      throw e;
    }
    throw Error(ErrorCode::Remote, "distribute: " + failure_ + " (rank " +
                                       std::to_string(comm_->rank()) + " then failed: " + e.what() +
                                       ")");
  }

  void send(const Message& m) {
    travel([&] { detail::send_request(*comm_, m, watch_); });
  }
  Message receive() {
    return travel([&] { return detail::receive_request(*comm_, watch_); });
  }
  // A request that fails to travel was abandoned while pending: none can follow it.
  template <class Move>
  auto travel(Move&& move) {
    try {
      return move();
    } catch (const Error& e) {
      failure_ = std::string("a request's broadcast failed (") + e.what() + ")";
      throw;
    }
  }
  static std::vector<std::vector<unsigned char>> to_bytes(const std::vector<std::vector<T>>& in) {
    std::vector<std::vector<unsigned char>> out(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(in[i].data());
      out[i].assign(p, p + in[i].size() * sizeof(T));
    }
    return out;
  }
  static std::vector<std::vector<T>> from_bytes(const std::vector<std::vector<unsigned char>>& in) {
    std::vector<std::vector<T>> out(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      out[i].resize(in[i].size() / sizeof(T));
      if (!in[i].empty()) std::memcpy(out[i].data(), in[i].data(), in[i].size());
    }
    return out;
  }

  // Every rank runs the request.
  typename Function<T>::Outputs execute(const Message& m) {
    switch (m.kind) {
      case Kind::call: {
        std::vector<const Data<T>*> ds;
        for (const std::string& d : m.data) ds.push_back(&find(data_, d, "Data"));
        const RowSelection& sel = m.selection;
        CallOptions o;
        if (!sel.indices.empty()) {
          o.batch = Batch::indices(sel.indices);
        } else {
          const std::size_t stop = sel.count ? sel.start + (sel.count - 1) * sel.step + 1 : sel.start;
          o.batch = Batch::slice(sel.start, stop, std::max<std::size_t>(sel.step, 1));
        }
        o.num_slices = m.num_slices;
        return find(functions_, m.name, "Function")(ds, from_bytes(m.inputs), o);
      }
      case Kind::all_reduce: find(shared_, m.name, "Shared").all_reduce(static_cast<ReduceOp>(m.op)); break;
      case Kind::reduce: find(shared_, m.name, "Shared").reduce(static_cast<ReduceOp>(m.op)); break;
      case Kind::broadcast: find(shared_, m.name, "Shared").broadcast(0); break;
      case Kind::gather: find(shared_, m.name, "Shared").gather(m.arg); break;
      case Kind::close: break;
    }
    return {};
  }

  enum class State { setup, serving, closed };
  State state_ = State::setup;
  Communicator* comm_;
  detail::PeerWatch watch_;
  std::string failure_;  // why requests can no longer be driven ("rank 2 (pid 1234) died")
  bool in_request_ = false;  // a request under way, or one that failed on the master alone
  std::map<std::string, Function<T>*> functions_;
  std::map<std::string, const Data<T>*> data_;
  std::map<std::string, Shared<T>*> shared_;
};

}  // namespace synk
