// Distributed (synk/distribute.h): the untyped part of master-driven mode. Registration and the
// calls' typed glue are templates in the header; the serving loop, the names check, the
// driving of a request and its failures are here.
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/finalize_hooks.h"
#include "synk/agreement.h"
#include "synk/distribute.h"

namespace synk {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0, nl;
  while ((nl = text.find('\n', pos)) != std::string::npos) {
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

// What `own` has that rank 0's `theirs` has not, and the other way.
std::string names_differ(const std::vector<std::string>& theirs,
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

}  // namespace

namespace detail {

std::string readable_type_name(const std::type_info& t) {
  int status = 0;
  char* name = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string text = status == 0 && name ? name : t.name();
  std::free(name);
  return text;
}

const char* driven_op_name(DrivenOp op) {
  switch (op) {
    case DrivenOp::shared_broadcast:
    case DrivenOp::shared_broadcast_value: return "broadcast";
    case DrivenOp::shared_all_reduce: return "all_reduce";
    case DrivenOp::shared_reduce: return "reduce";
    case DrivenOp::shared_reduced: return "reduced";
    case DrivenOp::shared_gather: return "gather";
    case DrivenOp::shared_all_gather: return "all_gather";
    case DrivenOp::shared_scatter:
    case DrivenOp::shared_scatter_rows: return "scatter";
    case DrivenOp::shared_get_value: return "get_value";
    case DrivenOp::shared_set_value:
    case DrivenOp::data_set_value: return "set_value";
    case DrivenOp::shared_get_shapes: return "get_shapes";
    case DrivenOp::data_resize: return "resize";
    case DrivenOp::data_load: return "load";
    case DrivenOp::data_free: return "free";
  }
  return "request";
}

}  // namespace detail

namespace {

// The masters between serve() and close(). MPI_Finalize closes them, so that the workers leave
// serve(): a master that ended by std::exit, or held its Distributed past main (Synkhronos
// closed at exit too), left them waiting for a request, and itself in MPI_Finalize, for ever.
constinit detail::ClosedAtFinalize<Distributed> serving_masters(
    [](Distributed& d) { d.close(); }, "distribute: a master still serving");

}  // namespace

Distributed::~Distributed() {
  if (!is_master() || state_ != State::serving) return;
  serving_masters.remove(this);
  link_objects(nullptr);
  detail::set_master_alone(*comm_, nullptr);
  if (!failure_.empty()) return;
  try {
    close();
  } catch (...) {
  }
}

bool Distributed::serve() {
  if (state_ != State::setup) {
    throw Error(ErrorCode::InvalidUsage, "distribute: serve() is called once per Distributed");
  }
  watch_.start(*comm_);
  check_same_names();
  state_ = State::serving;
  if (is_master()) {
    link_objects(this);
    detail::set_master_alone(*comm_, "serve()");
    serving_masters.add(this);
    return true;
  }
  for (;;) {
    const Message m = receive();
    if (m.kind == Kind::close) {
      state_ = State::closed;
      return false;
    }
    try {
      execute(m);
    } catch (const Error& e) {
      // A body that threw, a bad argument: the master got the error too (a request's checks and
      // collectives fail on every rank alike), so keep serving. A rank that died: nobody can
      // finish a call any more.
      throw_if_peer_died(e);
    }
  }
}

void Distributed::close() {
  // A worker's serve() has returned by then: its close() does nothing (before serve() an error).
  if (!is_master() && state_ != State::closed) check_driving("close");
  if (is_master()) detail::set_master_alone(*comm_, nullptr);  // its collectives run again
  if (!failure_.empty() || state_ == State::closed) return;  // a second close does nothing
  // After a request that failed on the master alone the close still goes: it travels as a
  // message, which no collective can take, and the workers read it once back from that request.
  check_driving("close", /*after_unfinished=*/true);
  Message m;
  m.kind = Kind::close;
  state_ = State::closed;
  serving_masters.remove(this);
  link_objects(nullptr);
  send(m);
}

void Distributed::all_reduce(const std::string& name, ReduceOp op) {
  shared_request(name, detail::DrivenOp::shared_all_reduce, {static_cast<std::int64_t>(op), 0, 0});
}
void Distributed::reduce(const std::string& name, ReduceOp op) {
  shared_request(name, detail::DrivenOp::shared_reduce, {static_cast<std::int64_t>(op), 0, 0});
}
void Distributed::broadcast(const std::string& name) {
  shared_request(name, detail::DrivenOp::shared_broadcast, {});
}

// The master runs the request on its own Shared, whose hook brings the workers in.
void Distributed::shared_request(const std::string& name, detail::DrivenOp op,
                                 detail::DrivenArgs args) {
  check_driving(detail::driven_op_name(op));
  find(shared_, name, "Shared").serve(object_request(op, name, args));
}

void Distributed::drive(detail::DrivenOp op, const std::string& name,
                        const detail::DrivenArgs& args, const std::function<void()>& here,
                        const detail::DrivenRows* rows) {
  if (driving_) {  // a collective inside a request's own part: the workers are in it already
    here();
    return;
  }
  check_driving(detail::driven_op_name(op));
  if (op >= detail::DrivenOp::data_set_value) check_data_request(name);
  check_result_reaches_master(op, name, args);
  Message m = object_request(op, name, args);
  if (rows) {
    m.data = {name_of_data(rows->data)};
    m.selection = *rows->selection;
  }
  if (makes_no_collective(op)) {
    drive_request(m, [&] { agree_on(here); });
  } else {
    drive_request(m, here);
  }
}

// A scatter from a Data reads each rank's rows from the node's segment: no collective, so a
// failure on one rank (a worker whose Data of that name has fewer rows) reached nobody else.
bool Distributed::makes_no_collective(detail::DrivenOp op) {
  return op == detail::DrivenOp::shared_scatter_rows;
}

// Runs `part` (a request's part that makes no collective), then every rank learns whether it
// failed anywhere: where it did, this rank's own error, and elsewhere Remote naming that rank.
void Distributed::agree_on(const std::function<void()>& part) {
  std::optional<Error> mine;
  try {
    part();
  } catch (const Error& e) {
    mine = e;
  } catch (const std::exception& e) {
    mine = Error(ErrorCode::InvalidUsage, e.what());
  }
  const std::optional<RankFailure> first =
      first_failure(*comm_, mine.has_value(), mine ? mine->message() : std::string());
  if (!first) return;
  if (mine) throw *mine;
  throw Error(ErrorCode::Remote,
              "distribute: rank " + std::to_string(first->rank) + " failed: " + first->text);
}

// A Data request may be refused on the master before it is sent. Its collectives wait in MPI
// without a deadline, so a worker that died while the master was busy is looked for first.
void Distributed::check_data_request(const std::string& name) {
  if (find(data_, name, "Data").read_only) {
    throw Error(ErrorCode::InvalidUsage, "distribute: Data '" + name +
                                             "' was added read only (const): the master cannot "
                                             "change it after serve()");
  }
  std::string deaths = watch_.deaths();
  if (deaths.empty()) return;
  failure_ = std::move(deaths);
  throw Error(ErrorCode::Remote, "distribute: " + failure_ + "; rank 0 cannot change Data '" +
                                     name + "'");
}

// A gather, or a reduction returned, at another rank than the master gives the master nothing:
// it is refused before anything is sent (it used to return empty, as if there were no values).
void Distributed::check_result_reaches_master(detail::DrivenOp op, const std::string& name,
                                              const detail::DrivenArgs& args) const {
  const bool returns = op == detail::DrivenOp::shared_gather || op == detail::DrivenOp::shared_reduced;
  if (!returns || args.b == 0) return;
  throw Error(ErrorCode::InvalidArgument,
              std::string("distribute: ") + detail::driven_op_name(op) + " of Shared '" + name +
                  "' to root " + std::to_string(args.b) + ": in master-driven mode the result "
                  "goes to the master (root 0); the other ranks only serve");
}

// Registration comes before serve() (a later one would never reach the workers), once a name.
void Distributed::check_can_add(const std::map<std::string, Entry>& map, const std::string& name,
                                const char* what) const {
  if (state_ != State::setup) {
    throw Error(ErrorCode::InvalidUsage, std::string("distribute: add() of ") + what + " '" + name +
                                             "' comes before serve()");
  }
  if (map.count(name)) {
    throw Error(ErrorCode::InvalidArgument,
                std::string("distribute: a ") + what + " named '" + name + "' was added already");
  }
}

// What the Data at `data` was added as (its rows travel by name).
std::string Distributed::name_of_data(const void* data) const {
  for (const auto& entry : data_) {
    if (entry.second.object == data) return entry.first;
  }
  throw Error(ErrorCode::InvalidUsage,
              "distribute: a Data that reaches the workers must be added to the Distributed "
              "first (add(name, data) on every rank)");
}

Distributed::Message Distributed::object_request(detail::DrivenOp op, const std::string& name,
                                                 const detail::DrivenArgs& args) {
  Message m;
  m.kind = Kind::object;
  m.op = op;
  m.args = args;
  m.name = name;
  return m;
}

// Requests come from the master, between serve() and close(): anything else would wait for
// ranks that are not listening (a worker's request hung; the master's before serve() or after
// close() ran into SYNK_TIMEOUT).
void Distributed::check_driving(const char* what, bool after_unfinished) const {
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
  } else if (driving_) {
    why = "is made inside another request (a Function body on the master): the workers are in "
          "that request, and this one would reach them only after it";
  } else if (!unfinished_.empty() && !after_unfinished) {
    why = "cannot follow a request that failed on the master alone (" + unfinished_ +
          "): the workers may still be inside it";
  }
  if (!why.empty()) throw Error(ErrorCode::InvalidUsage, std::string("distribute: ") + what + " " + why);
}

// The registered names, one per line, kind first, sorted (the maps are ordered).
std::string Distributed::names() const {
  std::string text;
  for (const auto* map : {&functions_, &data_, &shared_}) {
    for (const auto& entry : *map) text += entry.second.line + "\n";
  }
  return text;
}

// Collective. Every rank compares its names with rank 0's; where any differs, the lowest such
// rank tells every rank what it has that rank 0 has not, and the other way.
void Distributed::check_same_names() {
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

void Distributed::link_objects(detail::DriveHook* hook) {
  for (const auto* map : {&functions_, &data_, &shared_}) {
    for (const auto& entry : *map) {
      if (entry.second.link) entry.second.link(hook);
    }
  }
}

// The object is going (a master that unwinds past objects declared after this Distributed):
// setting or clearing its link later would write into freed memory.
void Distributed::unlinked(const detail::DriveLink* link) noexcept {
  for (auto* map : {&functions_, &data_, &shared_}) {
    for (auto& entry : *map) {
      if (entry.second.link_at != link) continue;
      entry.second.link = nullptr;
      entry.second.link_at = nullptr;
    }
  }
}

void Distributed::check_direct_call(const std::string& name) const {
  if (driving_ || comm_->size() == 1) return;  // the workers are in it, or there are none
  throw Error(ErrorCode::InvalidUsage,
              "Function '" + name + "': on the master between serve() and close(), call it as "
              "Distributed::call(f, {data names}, ...), which brings the workers into it; a "
              "direct call would wait for them until SYNK_TIMEOUT");
}

// The master's side of every request: send it, run its own part. Once a rank has died every
// later request fails at once, since no collective can complete.
void Distributed::drive_request(const Message& m, const std::function<void()>& here) {
  if (!failure_.empty()) {
    throw Error(ErrorCode::InvalidUsage,
                "distribute: " + failure_ + " earlier; this job's ranks cannot be driven any more");
  }
  // A request's collectives fail on every rank together (a body that threw anywhere, a
  // mismatch: the workers then keep serving, see serve()), except where this rank waited past
  // SYNK_TIMEOUT alone, or failed with something other than a synk::Error (no memory): then
  // the request may still be under way on the workers, and no other can follow it.
  struct Driving {  // the workers are in the request: the master's collectives may run
    Distributed& d;
    explicit Driving(Distributed& to) : d(to) {
      d.driving_ = true;
      detail::set_master_alone(*d.comm_, nullptr);
    }
    ~Driving() {
      d.driving_ = false;
      detail::set_master_alone(*d.comm_, "serve()");
    }
  };
  try {
    Driving driving(*this);
    send(m);
    here();
  } catch (const Error& e) {
    throw_if_peer_died(e);
    if (e.code() == ErrorCode::Timeout) unfinished_ = e.what();
    throw;
  } catch (const std::exception& e) {
    unfinished_ = e.what();
    throw;
  } catch (...) {
    unfinished_ = "an exception that is not a std::exception";
    throw;
  }
}

// After `e`: when a watched rank has died, remembers it and throws Error(Remote) naming it (a
// wait on the shm group already says so; one on MPI may have failed otherwise).
void Distributed::throw_if_peer_died(const Error& e) {
  std::string deaths = watch_.deaths();
  if (deaths.empty()) return;
  failure_ = std::move(deaths);
  if (e.code() == ErrorCode::Remote && std::string(e.what()).find(failure_) != std::string::npos) {
    throw e;
  }
  throw Error(ErrorCode::Remote, "distribute: " + failure_ + " (rank " +
                                     std::to_string(comm_->rank()) + " then failed: " + e.what() +
                                     ")");
}

// A request that fails to travel was abandoned while pending: none can follow it.
void Distributed::send(const Message& m) {
  try {
    detail::send_request(*comm_, m, watch_);
  } catch (const Error& e) {
    failure_ = std::string("a request failed to travel (") + e.what() + ")";
    throw;
  }
}

Distributed::Message Distributed::receive() {
  try {
    return detail::receive_request(*comm_, watch_);
  } catch (const Error& e) {
    failure_ = std::string("a request failed to travel (") + e.what() + ")";
    throw;
  }
}

const Distributed::Entry& Distributed::find(const std::map<std::string, Entry>& map,
                                            const std::string& name, const char* what) const {
  auto it = map.find(name);
  if (it == map.end()) {
    throw Error(ErrorCode::InvalidArgument,
                std::string("distribute: no ") + what + " '" + name + "'");
  }
  return it->second;
}

// A worker runs the master's request.
void Distributed::execute(const Message& m) {
  switch (m.kind) {
    case Kind::call: find(functions_, m.name, "Function").serve(m); break;
    case Kind::object: {
      const bool data = m.op >= detail::DrivenOp::data_set_value;
      const Entry& e = find(data ? data_ : shared_, m.name, data ? "Data" : "Shared");
      if (makes_no_collective(m.op)) {
        agree_on([&] { e.serve(m); });
      } else {
        e.serve(m);
      }
      break;
    }
    case Kind::close: break;
  }
}

}  // namespace synk
