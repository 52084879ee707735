// Master-driven mode, the Synkhronos way: the training loop is written once, as a serial
// program on rank 0; the other ranks serve its Function calls and Shared collectives until
// close(). Functions, Data and Shared variables are registered under the same names on every
// rank before serve(). A body that throws on a worker reaches the master as a synk::Error naming
// that rank, and the workers keep serving.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "synk/data.h"
#include "synk/function.h"
#include "synk/shared.h"

namespace synk {

template <class T>
class Distributed {
 public:
  explicit Distributed(Communicator& comm) : comm_(&comm) {}

  void add(Function<T>& f) { functions_[f.name()] = &f; }
  void add(const std::string& name, const Data<T>& d) { data_[name] = &d; }
  void add(Shared<T>& s) { shared_[s.name()] = &s; }

  bool is_master() const { return comm_->rank() == 0; }

  // On a worker: serves the master's requests, returns when the master calls close().
  // On the master: returns at once. Returns is_master().
  bool serve() {
    if (is_master()) return true;
    for (;;) {
      Command c = receive();
      if (c.kind == Kind::close) return false;
      try {
        execute(c, {}, {}, Batch::all());
      } catch (const Error&) {
        // The master got the error too (every rank fails a call together); keep serving.
      }
    }
  }

  // On the master: runs function `name` on every rank (see Function::operator()).
  typename Function<T>::Outputs call(const std::string& name, const std::vector<std::string>& data,
                                     const std::vector<std::vector<T>>& inputs = {},
                                     const Batch& batch = Batch::all(), int num_slices = 1) {
    Command c{};
    c.kind = Kind::call;
    set_name(c.name, name);
    c.num_slices = num_slices;
    c.n_data = static_cast<std::int32_t>(data.size());
    send(c);
    send_strings(data);
    send_inputs(inputs);
    return execute(c, data, inputs, batch);
  }
  // On the master: a collective on Shared variable `name` over every rank.
  void all_reduce(const std::string& name, ReduceOp op = ReduceOp::avg) { shared_op(name, Kind::all_reduce, op); }
  void reduce(const std::string& name, ReduceOp op = ReduceOp::avg) { shared_op(name, Kind::reduce, op); }
  void broadcast(const std::string& name) { shared_op(name, Kind::broadcast, ReduceOp::sum); }
  std::vector<T> gather(const std::string& name, int nd_up = 1) {
    Command c{};
    c.kind = Kind::gather;
    set_name(c.name, name);
    c.arg = nd_up;
    send(c);
    return shared(name).gather(nd_up);
  }
  // On the master: the workers leave serve().
  void close() {
    Command c{};
    c.kind = Kind::close;
    send(c);
  }

 private:
  enum class Kind : std::int32_t { call, all_reduce, reduce, broadcast, gather, close };
  struct Command {
    Kind kind;
    std::int32_t num_slices;
    std::int32_t n_data;
    std::int32_t arg;
    std::int32_t op;
    char name[108];
  };

  static void set_name(char* dst, const std::string& name) {
    if (name.size() >= sizeof(Command::name)) {
      throw Error(ErrorCode::InvalidArgument, "distribute: name '" + name + "' is too long");
    }
    std::memcpy(dst, name.c_str(), name.size() + 1);
  }

  void shared_op(const std::string& name, Kind k, ReduceOp op) {
    Command c{};
    c.kind = k;
    set_name(c.name, name);
    c.op = static_cast<std::int32_t>(op);
    send(c);
    execute(c, {}, {}, Batch::all());
  }

  // Commands travel by MPI_Ibcast and the workers poll with sleeps: an idle worker costs no CPU
  // and is never timed out, however long the master's serial part takes.
  void bcast(void* p, std::size_t bytes) {
    MPI_Request req;
    MPI_Ibcast(p, static_cast<int>(bytes), MPI_BYTE, 0, comm_->mpi_comm(), &req);
    int done = 0;
    for (int spins = 0; !done; ++spins) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done && spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  void send(Command& c) { bcast(&c, sizeof c); }
  Command receive() {
    Command c{};
    bcast(&c, sizeof c);
    return c;
  }
  template <class V>
  void bcast_vector(std::vector<V>& v) {
    std::uint64_t n = v.size();
    bcast(&n, sizeof n);
    v.resize(n);
    if (n) comm_->broadcast(v.data(), n * sizeof(V), DataType::uint8, 0);
  }
  void send_strings(const std::vector<std::string>& names) {
    for (const std::string& s : names) {
      std::vector<char> chars(s.begin(), s.end());
      bcast_vector(chars);
    }
  }
  std::vector<std::string> receive_strings(int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
      std::vector<char> chars;
      bcast_vector(chars);
      out.emplace_back(chars.begin(), chars.end());
    }
    return out;
  }
  void send_inputs(std::vector<std::vector<T>> inputs) {
    std::uint64_t n = inputs.size();
    bcast(&n, sizeof n);
    for (auto& v : inputs) bcast_vector(v);
  }
  std::vector<std::vector<T>> receive_inputs() {
    std::uint64_t n = 0;
    bcast(&n, sizeof n);
    std::vector<std::vector<T>> inputs(n);
    for (auto& v : inputs) bcast_vector(v);
    return inputs;
  }
  RowSelection exchange_selection(const RowSelection* mine) {
    std::vector<std::uint64_t> head(3);
    std::vector<std::size_t> idx;
    if (mine) {
      head = {mine->start, mine->count, mine->step};
      idx = mine->indices;
    }
    bcast_vector(head);
    bcast_vector(idx);
    RowSelection s;
    s.start = head[0];
    s.count = head[1];
    s.step = head[2];
    s.indices = std::move(idx);
    return s;
  }

  Shared<T>& shared(const std::string& name) {
    auto it = shared_.find(name);
    if (it == shared_.end()) throw Error(ErrorCode::InvalidArgument, "distribute: no Shared '" + name + "'");
    return *it->second;
  }

  // Every rank runs the command; the master's arguments reach the workers on the way.
  typename Function<T>::Outputs execute(const Command& c, std::vector<std::string> data,
                                        std::vector<std::vector<T>> inputs, const Batch& batch) {
    const std::string name(c.name);
    switch (c.kind) {
      case Kind::call: {
        if (!is_master()) {
          data = receive_strings(c.n_data);
          inputs = receive_inputs();
        }
        std::vector<const Data<T>*> ds;
        for (const std::string& d : data) {
          auto it = data_.find(d);
          if (it == data_.end()) throw Error(ErrorCode::InvalidArgument, "distribute: no Data '" + d + "'");
          ds.push_back(it->second);
        }
        // The master resolves the batch against its Data; the workers take the same rows.
        RowSelection sel;
        if (is_master()) {
          const RowSelection whole = batch.select(ds.empty() ? 0 : ds[0]->rows());
          sel = exchange_selection(&whole);
        } else {
          sel = exchange_selection(nullptr);
        }
        auto it = functions_.find(name);
        if (it == functions_.end()) throw Error(ErrorCode::InvalidArgument, "distribute: no Function '" + name + "'");
        CallOptions o;
        if (!sel.indices.empty()) {
          o.batch = Batch::indices(sel.indices);
        } else {
          const std::size_t stop = sel.count ? sel.start + (sel.count - 1) * sel.step + 1 : sel.start;
          o.batch = Batch::slice(sel.start, stop, std::max<std::size_t>(sel.step, 1));
        }
        o.num_slices = c.num_slices;
        return (*it->second)(ds, inputs, o);
      }
      case Kind::all_reduce: shared(name).all_reduce(static_cast<ReduceOp>(c.op)); break;
      case Kind::reduce: shared(name).reduce(static_cast<ReduceOp>(c.op)); break;
      case Kind::broadcast: shared(name).broadcast(0); break;
      case Kind::gather: shared(name).gather(c.arg); break;
      case Kind::close: break;
    }
    return {};
  }

  Communicator* comm_;
  std::map<std::string, Function<T>*> functions_;
  std::map<std::string, const Data<T>*> data_;
  std::map<std::string, Shared<T>*> shared_;
};

}  // namespace synk
