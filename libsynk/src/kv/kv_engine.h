// The machinery behind synk::KeyValue (synk/key_value.h).
//
// Keys are declared collectively (init_key), so the n-th key is the same on every rank and is
// known by its slot n. Pushes and pulls only change a slot's state under the mutex; the engine
// runs cycles, each collective over a private duplicate of the communicator:
//  1. a header (max over the ranks): how many slots, whether any rank has a push not yet
//     reduced, whether any rank is still open (not closing), whether any rank sees a stall,
//     whether any rank is closing, whether any rank has not joined or has a push of its own
//     waiting (while one has, a joined rank shadows the others' keys);
//  2. when some rank has a push waiting, a byte per slot, "not pushed here" (max over the
//     ranks): the slots that every rank has pushed are ready (a rank that has joined says it
//     has every one, and pushes the op's identity for those the others have); then, for two
//     or more, their priorities (max);
//  3. on a stall, or with a push waiting while some rank closes, every rank's status byte per
//     slot and whether it has closed (all_gather), to name the ranks missing (a key that a
//     closed rank has not pushed fails at once);
//  4. the ready keys in buckets (kv_plan.h): fused into the fusion buffer, or alone in place,
//     or, for a key larger than SYNK_PARTITION_BYTES, its next part in place; then each key's
//     result goes to its pull (or waits for it in the slot) (kv_buckets.cc). A cycle starts no
//     more buckets once it has moved SYNK_PARTITION_BYTES: what is left competes in the next
//     one with the keys pushed meanwhile, so that a key of higher priority need not wait for a
//     large one of lower priority (BytePS's partitions).
// Where the communicator runs calls in the background (shm, and every host backend when MPI
// allows threads: runs_in_background), a thread of the engine runs the cycles, so that they
// overlap the caller's work; the ranks' threads sleep together when a cycle finds no push
// waiting anywhere, and a push wakes its rank's thread. Elsewhere (mpi, hier under an MPI
// initialized below MPI_THREAD_MULTIPLE) the cycles run in pull_wait and close, on the
// caller's thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kv/kv_plan.h"
#include "kv/kv_stall.h"
#include "synk/communicator.h"
#include "synk/key_value.h"

namespace synk::detail {

using KvClock = std::chrono::steady_clock;

std::string key_text(int key);   // "key 3", for messages
std::string key_track(int key);  // the timeline's row of a key: "KeyValue key 3"

struct KeySlot {
  int key = 0;
  std::size_t index = 0;  // its place in the order of init_key (the cycles' slot)
  std::size_t count = 0;
  DataType dtype = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  std::size_t bytes = 0;
  int owner = -1;
  std::vector<std::byte> weights;  // on the owner, with an Updater

  // The push: data is the caller's until the push has been reduced.
  const void* pushed = nullptr;
  bool push_pending = false;  // pushed, not reduced yet
  bool awaiting_pull = false;  // pushed, and no pull since
  int push_priority = 0;
  KvClock::time_point pushed_at;
  bool warned = false;  // this push has been part of a stall warning
  std::uint64_t pushed_ns = 0;  // timeline::clock_ns() at the push, when the timeline is on
  bool negotiated = false;  // on the timeline: a cycle found it ready (cycles may find it again)
  // A split key's push (kv_plan.h), reduced a part per cycle: the bytes done so far (with an
  // Updater, of the reduce to the owner and then of the broadcast, 2 * bytes in all), and where
  // the parts go (the pull's out where the pull came before the first part, else result).
  std::size_t parts_done = 0;
  void* parts_dest = nullptr;
  // The next push, made after this push's pull but before its result was delivered: it starts
  // when the delivery has ended (start_queued_push), so that whether a push is taken never
  // depends on how far the reduction has come.
  const void* queued = nullptr;
  bool has_queued = false;
  int queued_priority = 0;
  // After this rank joined (KeyValue::join): its push of the op's identity for a key the
  // others pushed, and where that is kept.
  bool shadow_push = false;
  std::vector<std::byte> shadow;

  // A result that came before its pull.
  std::vector<std::byte> result;
  bool has_result = false;

  // The pull: open from pull() until pull_wait() returns.
  bool pull_open = false;
  bool pull_done = false;
  bool delivering = false;  // the result is in out; its callback runs (pull_done comes next)
  int waiters = 0;          // threads in pull_wait for it: a delivery wakes them
  std::uint64_t pull_serial = 0;  // counts the pulls: a waiter knows whether its pull is over
  void* out = nullptr;
  int pull_priority = 0;
  std::function<void()> callback;
};

class KvEngine {
 public:
  KvEngine(Communicator& comm, KeyValueOptions options);
  ~KvEngine();
  KvEngine(const KvEngine&) = delete;
  KvEngine& operator=(const KvEngine&) = delete;

  void init_key(int key, std::size_t count, DataType dtype, ReduceOp op, const void* weights);
  void push(int key, const void* data, int priority);
  void pull(int key, void* out, int priority, std::function<void()> callback);
  void pull_wait(int key);
  void close();
  // close(), but until every rank has joined or closed this rank takes part in every key the
  // others push, with the op's identity (Horovod's join, for uneven inputs).
  void join();
  void close_engine();  // close() from anywhere, even one of its own callbacks
  // The slot's fixed fields (count, dtype, owner); throws InvalidUsage for an unknown key.
  const KeySlot& declared(int key, const char* op) const;
  bool pull_open(int key) const;  // KeyValue::pulling

 private:
  struct CycleOutcome {
    bool progressed = false;    // some keys were reduced
    bool group_active = false;  // some rank had a push waiting
    bool finished = false;      // every rank has closed: no more cycles
  };

  KeySlot& slot_of(int key, const char* op);  // under m_
  void engine_loop();
  void run_cycles_until(const std::function<bool()>& done);
  bool try_cycle(CycleOutcome& o);
  CycleOutcome run_cycle();
  // `shadow`: this rank has joined and some rank has not: it has every key the others push.
  std::vector<ReadyKey> agree_on_ready(std::size_t n, std::vector<KeySlot*>& by_slot,
                                       bool shadow);
  // Under m_: this joined rank's push of the identity of k's op (shadow).
  void start_shadow_push_locked(KeySlot& k);
  void refuse_endless_close(bool all_closing);
  void inspect(std::size_t slots, bool closing_everywhere);
  // inspect's keys that some ranks pushed and others have not (mine: this rank's status
  // bytes, then its closed byte): the errors of those past SYNK_TIMEOUT; each other one waiting
  // past SYNK_STALL_WARN is warned of once.
  std::string warn_of_stalls(const std::vector<StalledKey>& part_keys,
                             const std::vector<std::uint8_t>& mine);
  void run_fused(const Bucket& b, const std::vector<KeySlot*>& keys);
  void run_alone(KeySlot& k);
  // Whether the key is reduced in parts: larger than SYNK_PARTITION_BYTES.
  bool split(const KeySlot& k) const;
  // The split key's next part (all of what is left of its round where part_bytes is 0);
  // delivers the key after its last part. Returns the part's bytes.
  std::size_t run_part(KeySlot& k, std::size_t part_bytes);
  // Runs the cycle's buckets in order, up to the partition size of bytes unless `whole`.
  void run_buckets(const std::vector<ReadyKey>& ready, const std::vector<KeySlot*>& by_slot,
                   bool whole);
  void reduce_and_update(const void* send, void* recv, std::size_t count, DataType dtype,
                         ReduceOp op, int owner, const std::function<std::exception_ptr()>& update);
  void reduce_alone(KeySlot& k);
  std::exception_ptr update_on_owner(KeySlot& k, void* reduced);
  void agree_on_update(const std::exception_ptr& failed);
  void deliver(const std::vector<KeySlot*>& keys, const std::vector<const void*>& srcs);
  // Under m_: the key's push of data starts (pending_ counts it already).
  void start_push_locked(KeySlot& k, const void* data, int priority);
  // Under m_, once the key's delivery has ended: its queued push, if any, starts. Returns
  // whether one did; then the caller, after unlocking, calls after_queued_push.
  bool start_queued_push_locked(KeySlot& k);
  void after_queued_push(KeySlot& k);
  void trace_ready(const std::vector<ReadyKey>& ready, const std::vector<KeySlot*>& by_slot);
  // Runs the user's code (a pull callback, an Updater call) under cycle_m_, one call at a time
  // on whichever thread; while it runs, pull_wait and close on its thread are refused (they
  // would wait for the very delivery, or the update, it is part of, forever).
  void run_user_code(const std::function<void()>& code);
  void fail(std::exception_ptr error);
  void throw_if_failed_locked();
  int choose_owner(std::size_t bytes);

  Communicator& user_;
  Communicator engine_comm_;
  std::shared_ptr<Updater> updater_;
  std::size_t fusion_bytes_;
  std::size_t partition_bytes_;
  double stall_warn_s_;
  double timeout_s_;
  int cycle_ms_;
  bool background_;
  NodeBuffer fusion_;
  std::vector<std::size_t> owned_bytes_;  // per rank, for choose_owner

  mutable std::mutex m_;
  std::condition_variable wake_;  // the engine thread sleeps on it
  std::condition_variable done_;  // pull_wait and close wait on it
  std::deque<KeySlot> slots_;     // deque: a slot stays where it is while others are added
  std::unordered_map<int, std::size_t> index_;
  std::size_t pending_ = 0;       // pushes not yet reduced, queued ones included
  // Per slot, 1 while its push is pending (KeySlot::push_pending): a cycle reads a byte per
  // key, not each key's slot, so that keys not pushed cost next to nothing.
  std::vector<std::uint8_t> pending_slots_;
  std::uint64_t pushes_ = 0;      // every push counts, so a pause can end at the next
  bool closing_ = false;
  bool joined_ = false;  // closing by join(): it shadows the others' keys
  KvClock::time_point closing_since_;  // close's wait for the other ranks ends at SYNK_TIMEOUT
  bool closed_ = false;
  bool finished_ = false;         // the cycles have ended
  std::exception_ptr failed_;
  bool failure_seen_ = false;
  // One thread runs cycles at a time (inline mode, one rank); recursive, for a callback that
  // pushes another key on one rank (its push reduces it within the delivery). The user's code
  // runs under it too, on whichever thread (the Updater's init and update, pull callbacks), so
  // that it runs one call at a time, as key_value.h says.
  std::recursive_mutex cycle_m_;
  std::mutex close_m_;
  std::thread thread_;
};

}  // namespace synk::detail
