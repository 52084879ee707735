// synk::KeyValue: mshadow-ps's asynchronous push and pull by key, on a Communicator.
//
// Each rank pushes an array under a key (a layer's gradient, as backprop makes it) and later
// pulls the key's reduction over the ranks (before that layer's next forward); in between synk
// agrees with the other ranks on which keys every rank has pushed, runs those highest priority
// first, fuses small ones into one collective (up to SYNK_FUSION_BYTES) and reduces large ones
// in parts (SYNK_PARTITION_BYTES), which a key of higher priority pushed meanwhile overtakes, so
// that the communication hides behind the caller's computation. Ranks may push in different
// orders and at different times. With an Updater, each key has an owner rank that alone applies
// the update to the reduced gradient, and pull returns the new weights: a sharded parameter
// server built from a reduce and a broadcast.
//
// Where the work runs: a thread of the KeyValue runs the cycles (so they overlap the caller's
// work), and the pull callbacks and Updater updates run on it (Updater::init runs in init_key). But
// where the cycles make MPI calls (the mpi and hier backends, SYNK_CHECK_CALLS) and MPI was
// initialized below MPI_THREAD_MULTIPLE (so no two threads may call it), they run on the caller's
// thread inside pull_wait and close, with no overlap: there a rank must not wait in a collective of
// its own for a rank that waits in pull_wait (the first never pushes, the second waits for it).
// With one rank a push is reduced in push itself. The Updater's calls (init, update) and the pull
// callbacks run one at a time, whichever threads run them; a callback the KeyValue runs that throws
// is logged (an Updater that throws fails the KeyValue on every rank). A pull whose result is there
// already runs its callback itself, on the caller's thread (once no other callback or update runs),
// and rethrows what it throws. A callback or an Updater call may push and pull, but not wait
// (pull_wait, close: InvalidUsage).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "synk/communicator.h"
#include "synk/types.h"

namespace synk {

namespace detail {
class KvEngine;
}

// One key's array, as an Updater sees it.
struct KeyArray {
  void* data = nullptr;
  std::size_t count = 0;
  DataType dtype = DataType::float32;

  // The elements as T (T must be the array's dtype).
  template <class T>
  std::span<T> as() const {
    if (data_type_of<T>() != dtype) {
      throw Error(ErrorCode::InvalidArgument, std::string("KeyArray::as: the array holds ") +
                                                  to_string(dtype) + ", not " +
                                                  to_string(data_type_of<T>()));
    }
    return {static_cast<T*>(data), count};
  }
};

// mshadow-ps's IModelUpdater: the update a key's owner applies (update on the owner).
class Updater {
 public:
  virtual ~Updater() = default;
  // On the key's owner, once, in init_key, with the key's initial weights (rank 0's).
  virtual void init(int key, KeyArray weights) {
    (void)key;
    (void)weights;
  }
  // On the key's owner, once per push of the key by every rank: `reduced_gradient` is the
  // reduction of the ranks' pushes (the key's op); change `weights` in place. One call at a
  // time (see "Where the work runs"). An exception fails the KeyValue on every rank.
  virtual void update(int key, KeyArray reduced_gradient, KeyArray weights) = 0;
};

struct KeyValueOptions {
  // Update on the owner: set, pull returns the owner's weights after its update.
  std::shared_ptr<Updater> updater;
};

class KeyValue {
 public:
  // Collective over comm. KeyValue's cycles run on a duplicate of comm (with comm's backend; a
  // host backend for nccl: the arrays are host memory), never mixing with the caller's calls;
  // init_key is a collective call on comm itself. comm must outlive it. Every rank must have the
  // same SYNK_FUSION_BYTES (checked here).
  explicit KeyValue(Communicator& comm, KeyValueOptions options = {});
  // Collective: waits until every rank has closed (close()), logging a failure instead of
  // throwing it. A pull still open then is completed first: its buffer must outlive the
  // KeyValue.
  ~KeyValue();
  KeyValue(const KeyValue&) = delete;
  KeyValue& operator=(const KeyValue&) = delete;

  // Collective over comm, in the same order on every rank: declares `key` (any int not declared
  // before) as an array of `count` elements of `dtype`, reduced with `op`. With an Updater,
  // `weights` (read on rank 0, count elements) are the key's initial weights, which its owner
  // keeps; without, weights is ignored.
  void init_key(int key, std::size_t count, DataType dtype, ReduceOp op = ReduceOp::sum,
                const void* weights = nullptr);
  // Starts the reduction of `data` (the key's count elements) with the other ranks' pushes of
  // the key; `data` is synk's until this rank's pull of the key has completed. A higher priority
  // runs sooner: among the keys every rank has pushed, by the highest over the ranks of the
  // push's priority plus that of its pull, where the pull is there when the cycle runs (it may
  // come after the push). Pushing a key again before its pull is an error naming the key; a
  // push made after the pull, before its result is delivered, starts once it is.
  void push(int key, const void* data, int priority = 0);
  // Asks for the result of the key's push (the reduction, or with an Updater the owner's new
  // weights) in `out` (count elements; may be the pushed data itself); `callback`, if any, runs
  // once out holds it (see "Where the work runs"; in pull itself when the result is already
  // there). Returns at once. A second pull of a key before
  // pull_wait of the first is an error naming the key.
  void pull(int key, void* out, int priority = 0, std::function<void()> callback = {});
  // Until the key's pull has completed (its callback has run); rethrows what failed it: a
  // rank that has not pushed the key within SYNK_TIMEOUT of this rank's push, named (after a
  // warning at SYNK_STALL_WARN), or a failure of the collectives. Throws InvalidUsage when the
  // key has no pull.
  void pull_wait(int key);
  // Collective: waits until every rank has closed, so that no push is lost; after it init_key,
  // push and pull are errors. Throws what failed (a key some ranks pushed and others never did,
  // named; as soon as a rank missing it closes, on every rank).
  void close();
  // close() for a rank whose inputs ran out first (Horovod's and PyTorch's join, for uneven
  // inputs): until every rank has joined or closed, this rank takes part in every key the
  // others push, with the op's identity (0 for sum and avg, 1 for prod, the dtype's extreme for
  // min and max); avg still divides by every rank. An owner's Updater still updates its keys.
  // Waits, without SYNK_TIMEOUT, until every rank has joined or closed (where the cycles run
  // on the caller's thread, each of its cycles waits for the others' within SYNK_TIMEOUT).
  // Every key is declared before any rank joins.
  void join();

  std::size_t count(int key) const;
  DataType dtype(int key) const;
  // Whether the key has a pull that no pull_wait has ended yet (complete or not): the pull's
  // `out` is still synk's. A pull_wait that failed has ended it; one refused at once has not.
  bool pulling(int key) const;
  // The rank that updates the key with an Updater (keys spread over the ranks by size); -1
  // without one.
  int owner(int key) const;

  // Typed conveniences: the dtype from T, the count from the span.
  template <class T>
  void init_key(int key, std::span<const T> weights, ReduceOp op = ReduceOp::sum) {
    init_key(key, weights.size(), data_type_of<T>(), op, weights.data());
  }
  template <class T>
  void push(int key, std::span<const T> data, int priority = 0) {
    check_typed(key, data.size(), data_type_of<T>(), "push");
    push(key, static_cast<const void*>(data.data()), priority);
  }
  template <class T>
  void pull(int key, std::span<T> out, int priority = 0, std::function<void()> callback = {}) {
    check_typed(key, out.size(), data_type_of<T>(), "pull");
    pull(key, static_cast<void*>(out.data()), priority, std::move(callback));
  }

 private:
  void check_typed(int key, std::size_t count, DataType dtype, const char* op) const;
  std::unique_ptr<detail::KvEngine> engine_;
};

}  // namespace synk
