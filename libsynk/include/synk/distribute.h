// Master-driven mode, the Synkhronos way: the training loop is written once, as a serial
// program on rank 0; the other ranks serve its Function calls and Shared and Data collectives
// until close(). Functions (of any element and output types), Data and Shared variables are
// registered under the same names on every rank before serve(). After serve(), the master
// calls a registered Shared's or Data's collectives as a serial program would (s.all_reduce(),
// s.get_value(1), x.set_value(v), x.resize(n)): each brings the workers into the same call. A
// body that throws on a worker reaches the master as a synk::Error naming that rank, and the
// workers keep serving. A rank that dies ends the job's driving: the master's call throws
// Error(Remote) naming it, and so does serve() on the other workers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "synk/data.h"
#include "synk/drive_hook.h"
#include "synk/function.h"
#include "synk/shared.h"

namespace synk {

// A fresh array of rows for one call, split across the ranks like a Data: shape[0] rows
// (an empty shape: values.size() rows of one element). Its values are read on the master only.
template <class T>
struct Rows {
  std::span<const T> values;
  std::vector<std::size_t> shape;
};

// What a master-driven call runs on: registered Data by name, then fresh arrays (which reach
// the workers through a scratch Data kept from call to call: slower than a Data set once, but
// correct), broadcast inputs, the batch (resolved against the first data input's rows) and
// the slices of each rank's share.
template <class T, class Out = T>
struct DrivenCall {
  std::vector<std::string> data;
  std::vector<Rows<T>> arrays;
  std::vector<std::vector<Out>> inputs;
  Batch batch = Batch::all();
  int num_slices = 1;
};

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
// src/data/request_wire.cc's, one for every type.
struct DriveRequest {
  enum class Kind : std::int32_t { call, object, close };
  Kind kind = Kind::close;
  DrivenOp op = DrivenOp::shared_broadcast;  // of an object request
  DrivenArgs args;
  std::int32_t num_slices = 1;
  std::string name;
  std::vector<std::string> data;
  std::vector<std::vector<std::uint64_t>> array_shapes;  // a call's fresh arrays
  std::vector<std::vector<unsigned char>> inputs;
  RowSelection selection;
};
// The master (rank 0) sends a request, which every other rank receives: one polled message of
// at most a fixed size to each worker, so a small request is a single message, and a synk
// broadcast of the rest of a larger one. Error(Remote) names a rank of this node that died; the master's send
// throws Error(Timeout) after SYNK_TIMEOUT. After a throw no later request can follow.
void send_request(Communicator& comm, const DriveRequest& request, const PeerWatch& watch);
DriveRequest receive_request(Communicator& comm, const PeerWatch& watch);

// The C++ name of a type, as written in the source ("Pixel", not its mangled "5Pixel").
std::string readable_type_name(const std::type_info& t);

// "float32" for synk's element types, the C++ name of any other.
template <class T>
std::string type_text() {
  if constexpr (requires { DataTypeOf<T>::value; }) {
    return to_string(data_type_of<T>());
  } else {
    return readable_type_name(typeid(T));
  }
}
}  // namespace detail

class Distributed final : private detail::DriveHook {
 public:
  explicit Distributed(Communicator& comm) : comm_(&comm) {}
  // On the master, one still serving (an exception unwound the master's program before its
  // close()) closes: the workers leave serve() instead of waiting for a request forever, and
  // the master with them in MPI_Finalize. After a request that failed on the master alone the
  // close waits for the workers to come back from it (its own message cannot meet them inside
  // a collective). A destructor does not throw: a close that fails is dropped (the workers then
  // end as a lost master leaves them: by mpirun). The registered objects must outlive it.
  ~Distributed();
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  // Registration, on every rank before serve(), the same names and types everywhere.
  template <class T, class Out>
  void add(Function<T, Out>& f);
  // A Data the master only reads through calls.
  template <class T>
  void add(const std::string& name, const Data<T>& d);
  // A Data the master may also change after serve(); `loader` is what this rank's node runs
  // when the master calls load() (needed on every rank for that, where the job spans nodes).
  template <class T>
  void add(const std::string& name, Data<T>& d,
           std::type_identity_t<std::function<void(T*)>> loader = {});
  template <class T>
  void add(Shared<T>& s);

  bool is_master() const { return comm_->rank() == 0; }

  // Collective: every rank calls it. First every rank checks that all registered the same
  // names and types (else InvalidUsage on every rank naming the difference: a request for a
  // name a worker lacked left the master waiting for SYNK_TIMEOUT). On a worker: serves the
  // master's requests, returns when the master calls close(); throws Error(Remote) naming a
  // rank of this node that died. On the master: returns at once. Returns is_master().
  bool serve();

  // On the master: runs `f` on every rank (see Function::operator()), on registered Data by
  // name, with the batch resolved against the first one's rows.
  template <class T, class Out>
  typename Function<T, Out>::Outputs call(Function<T, Out>& f, const std::vector<std::string>& data = {},
                                          const std::vector<std::vector<Out>>& inputs = {},
                                          const Batch& batch = Batch::all(), int num_slices = 1) {
    DrivenCall<T, Out> c;
    c.data = data;
    c.inputs = inputs;
    c.batch = batch;
    c.num_slices = num_slices;
    return call(f, c);
  }
  // The same, with fresh arrays after the named Data.
  template <class T, class Out>
  typename Function<T, Out>::Outputs call(Function<T, Out>& f, const DrivenCall<T, Out>& c);

  // On the master: a collective on Shared variable `name` over every rank (the same as calling
  // it on the Shared itself).
  void all_reduce(const std::string& name, ReduceOp op = ReduceOp::avg);
  void reduce(const std::string& name, ReduceOp op = ReduceOp::avg);
  void broadcast(const std::string& name);

  // On the master: the workers leave serve(). After a rank died it does nothing: the workers
  // left serve() by themselves.
  void close();

 private:
  using Kind = detail::DriveRequest::Kind;
  using Message = detail::DriveRequest;

  // A registered object: its line for the names check, what a worker does with a request for
  // it, and (objects the master drives) how to set or clear its hook.
  struct Entry {
    std::string line;
    std::function<void(const Message&)> serve;
    std::function<void(detail::DriveHook*)> link;
    const detail::DriveLink* link_at = nullptr;  // the object's link, until it is destroyed
    const void* object = nullptr;
    const std::type_info* type = nullptr;  // a Data's element type
    bool read_only = false;                // a const Data
  };

  void drive(detail::DrivenOp op, const std::string& name, const detail::DrivenArgs& args,
             const std::function<void()>& here, const detail::DrivenRows* rows) override;
  void check_direct_call(const std::string& name) const override;
  void unlinked(const detail::DriveLink* link) noexcept override;
  std::string name_of_data(const void* data) const;
  // Throws InvalidUsage where `what` cannot be driven now; `after_unfinished`: even after a
  // request that failed on the master alone (close).
  void check_driving(const char* what, bool after_unfinished = false) const;
  void check_data_request(const std::string& name);
  void check_result_reaches_master(detail::DrivenOp op, const std::string& name,
                                   const detail::DrivenArgs& args) const;
  static bool makes_no_collective(detail::DrivenOp op);
  void agree_on(const std::function<void()>& part);
  void check_can_add(const std::map<std::string, Entry>& map, const std::string& name,
                     const char* what) const;
  void check_same_names();
  std::string names() const;
  void link_objects(detail::DriveHook* hook);
  void drive_request(const Message& m, const std::function<void()>& here);
  void throw_if_peer_died(const Error& e);
  void send(const Message& m);
  Message receive();
  void execute(const Message& m);
  const Entry& find(const std::map<std::string, Entry>& map, const std::string& name,
                    const char* what) const;
  void shared_request(const std::string& name, detail::DrivenOp op, detail::DrivenArgs args);
  static Message object_request(detail::DrivenOp op, const std::string& name,
                                const detail::DrivenArgs& args);

  template <class T>
  // `user` names who reads it, for the error ("Function", "f" gives "Function 'f' reads ...").
  const Data<T>& data_named(const std::string& name, const char* kind,
                            const std::string& user) const;
  template <class T>
  Data<T>& scratch(std::size_t i, const std::vector<std::uint64_t>& shape);
  template <class T, class Out>
  typename Function<T, Out>::Outputs run_call(Function<T, Out>& f, const Message& m,
                                              const std::vector<Rows<T>>& arrays,
                                              const std::vector<std::vector<Out>>* inputs);

  enum class State { setup, serving, closed };
  State state_ = State::setup;
  Communicator* comm_;
  detail::PeerWatch watch_;
  std::string failure_;  // why requests can no longer be driven ("rank 2 (pid 1234) died")
  std::string unfinished_;  // why a request failed on the master alone (the workers may be in it)
  bool driving_ = false;    // the master is inside a request's own part (nested calls run)
  std::map<std::string, Entry> functions_, data_, shared_;
  std::map<std::string, std::shared_ptr<void>> scratch_;  // per element type and position
};

// ---- templates ----

template <class T, class Out>
void Distributed::add(Function<T, Out>& f) {
  check_can_add(functions_, f.name(), "Function");
  Entry e;
  e.line = "Function '" + f.name() + "' (" + detail::type_text<T>() + " -> " +
           detail::type_text<Out>() + ")";
  e.object = &f;
  e.link = [&f](detail::DriveHook* hook) { f.link_.set(hook, f.name()); };
  e.link_at = &f.link_;
  e.serve = [this, &f](const Message& m) { run_call<T, Out>(f, m, {}, nullptr); };
  functions_[f.name()] = std::move(e);
}

template <class T>
void Distributed::add(const std::string& name, const Data<T>& d) {
  check_can_add(data_, name, "Data");
  Entry e;
  e.line = "Data '" + name + "' (" + detail::type_text<T>() + ", read only)";
  e.object = &d;
  e.type = &typeid(T);
  e.read_only = true;  // its link refuses changes on the master (check_data_request)
  e.link = [name, &d](detail::DriveHook* hook) { d.link_.set(hook, name); };
  e.link_at = &d.link_;
  e.serve = [name](const Message& m) {
    throw Error(ErrorCode::InvalidUsage, "distribute: Data '" + name + "' was added read only; " +
                                             detail::driven_op_name(m.op) + " needs add() of a "
                                             "Data that is not const");
  };
  data_[name] = std::move(e);
}

template <class T>
void Distributed::add(const std::string& name, Data<T>& d,
                      std::type_identity_t<std::function<void(T*)>> loader) {
  check_can_add(data_, name, "Data");
  Entry e;
  e.line = "Data '" + name + "' (" + detail::type_text<T>() + (loader ? ", a loader)" : ")");
  e.object = &d;
  e.type = &typeid(T);
  e.link = [name, &d](detail::DriveHook* hook) { d.link_.set(hook, name); };
  e.link_at = &d.link_;
  e.serve = [name, &d, loader](const Message& m) {
    switch (m.op) {
      case detail::DrivenOp::data_set_value: d.set_value({}); break;
      case detail::DrivenOp::data_resize:
        d.resize(static_cast<std::size_t>(m.args.a), m.args.x);
        break;
      case detail::DrivenOp::data_load:
        if (!loader) {
          d.load([&](T*) {
            throw Error(ErrorCode::InvalidUsage, "distribute: Data '" + name +
                                                     "' was added without a loader on this node");
          });
        } else {
          d.load(loader);
        }
        break;
      case detail::DrivenOp::data_free: d.free(); break;
      default: break;
    }
  };
  data_[name] = std::move(e);
}

template <class T>
void Distributed::add(Shared<T>& s) {
  using Op = detail::DrivenOp;
  check_can_add(shared_, s.name(), "Shared");
  Entry e;
  e.line = "Shared '" + s.name() + "' (" + detail::type_text<T>() + ")";
  e.object = &s;
  e.link = [&s](detail::DriveHook* hook) { s.link_.set(hook, s.name()); };
  e.link_at = &s.link_;
  e.serve = [this, &s](const Message& m) {
    const int a = static_cast<int>(m.args.a), b = static_cast<int>(m.args.b);
    switch (m.op) {
      case Op::shared_broadcast: s.broadcast(a); break;
      case Op::shared_broadcast_value: s.broadcast(std::vector<T>{}); break;
      case Op::shared_all_reduce: s.all_reduce(static_cast<ReduceOp>(a)); break;
      case Op::shared_reduce: s.reduce(static_cast<ReduceOp>(a), b); break;
      case Op::shared_reduced: s.reduced(static_cast<ReduceOp>(a), b); break;
      case Op::shared_gather: s.gather(a, b); break;
      case Op::shared_all_gather: s.all_gather(a); break;
      case Op::shared_scatter: s.scatter(a); break;
      case Op::shared_scatter_rows:
        s.scatter(data_named<T>(m.data.at(0), "Shared", s.name()), Batch::of(m.selection));
        break;
      case Op::shared_get_value: s.get_value(a); break;
      case Op::shared_set_value: s.set_value(a, {}); break;
      case Op::shared_get_shapes: s.get_shapes(); break;
      default: break;
    }
  };
  shared_[s.name()] = std::move(e);
}

template <class T>
const Data<T>& Distributed::data_named(const std::string& name, const char* kind,
                                       const std::string& user) const {
  const Entry& e = find(data_, name, "Data");
  if (*e.type != typeid(T)) {
    throw Error(ErrorCode::InvalidArgument, std::string(kind) + " '" + user + "' reads " +
                                                detail::type_text<T>() +
                                                " rows, but Data '" + name + "' is " +
                                                e.line.substr(e.line.find('(')));
  }
  return *static_cast<const Data<T>*>(e.object);
}

// Collective (every rank runs the same request): the scratch Data of fresh array `i`, made or
// resized to `shape`; it grows with room to spare, so that calls of varying rows rarely make
// a new segment.
template <class T>
Data<T>& Distributed::scratch(std::size_t i, const std::vector<std::uint64_t>& shape) {
  const std::string key = std::string(typeid(T).name()) + "#" + std::to_string(i);
  std::vector<std::size_t> want(shape.begin(), shape.end());
  auto& slot = scratch_[key];
  auto* d = static_cast<Data<T>*>(slot.get());
  if (!d || !std::equal(want.begin() + 1, want.end(), d->shape().begin() + 1,
                        d->shape().end())) {
    slot = std::make_shared<Data<T>>(*comm_, want, 1.5);
    return *static_cast<Data<T>*>(slot.get());
  }
  if (d->rows() != want[0]) d->resize(want[0], 1.5);
  return *d;
}

template <class T, class Out>
typename Function<T, Out>::Outputs Distributed::call(Function<T, Out>& f,
                                                     const DrivenCall<T, Out>& c) {
  check_driving("call");
  const Entry& e = find(functions_, f.name(), "Function");
  if (e.object != &f) {
    throw Error(ErrorCode::InvalidArgument,
                "distribute: call: Function '" + f.name() + "' is not the one added under that name");
  }
  Message m;
  m.kind = Kind::call;
  m.name = f.name();
  m.data = c.data;
  m.num_slices = c.num_slices;
  for (const Rows<T>& a : c.arrays) {
    std::vector<std::uint64_t> shape;
    if (a.shape.empty()) shape.push_back(a.values.size());
    for (std::size_t d : a.shape) shape.push_back(d);
    std::uint64_t elems = 1;
    for (std::uint64_t d : shape) elems *= d;
    if (elems != a.values.size()) {
      throw Error(ErrorCode::InvalidArgument, "distribute: call of '" + f.name() + "': an array of " +
                                                  std::to_string(a.values.size()) +
                                                  " values does not fill its shape");
    }
    m.array_shapes.push_back(std::move(shape));
  }
  for (const std::vector<Out>& in : c.inputs) {
    const auto* p = reinterpret_cast<const unsigned char*>(in.data());
    m.inputs.emplace_back(p, p + in.size() * sizeof(Out));
  }
  std::size_t rows = 0;
  if (!c.data.empty()) {
    rows = data_named<T>(c.data[0], "Function", f.name()).rows();
  } else if (!m.array_shapes.empty()) {
    rows = static_cast<std::size_t>(m.array_shapes[0][0]);
  }
  m.selection = c.batch.select(rows);
  typename Function<T, Out>::Outputs out;
  auto here = [&] { out = run_call(f, m, c.arrays, &c.inputs); };
  drive_request(m, [&here] { here(); });  // one reference: a std::function that needs no heap
  return out;
}

// Every rank runs a call: the named Data, then the fresh arrays (through the scratch Data,
// filled from the master's values), with the master's inputs (`inputs` on the master, decoded
// from the request elsewhere) and selection.
template <class T, class Out>
typename Function<T, Out>::Outputs Distributed::run_call(
    Function<T, Out>& f, const Message& m, const std::vector<Rows<T>>& arrays,
    const std::vector<std::vector<Out>>* inputs) {
  std::vector<const Data<T>*> ds;
  for (const std::string& name : m.data) ds.push_back(&data_named<T>(name, "Function", f.name()));
  for (std::size_t i = 0; i < m.array_shapes.size(); ++i) {
    Data<T>& d = scratch<T>(i, m.array_shapes[i]);
    d.set_value(i < arrays.size() ? arrays[i].values : std::span<const T>());
    ds.push_back(&d);
  }
  std::vector<std::vector<Out>> decoded;
  if (!inputs) {
    decoded.resize(m.inputs.size());
    for (std::size_t i = 0; i < m.inputs.size(); ++i) {
      decoded[i].resize(m.inputs[i].size() / sizeof(Out));
      if (!decoded[i].empty()) std::memcpy(decoded[i].data(), m.inputs[i].data(), m.inputs[i].size());
    }
    inputs = &decoded;
  }
  CallOptions o;
  o.batch = Batch::of(m.selection);
  o.num_slices = m.num_slices;
  return f(ds, *inputs, o);
}

}  // namespace synk
