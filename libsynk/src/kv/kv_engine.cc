// See kv_engine.h.
#include "kv/kv_engine.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include <mpi.h>

#include "core/backoff.h"
#include "core/call_label.h"
#include "core/finalize_hooks.h"
#include "core/env.h"
#include "core/logging.h"
#include "core/reduce_identity.h"
#include "core/spread.h"
#include "core/timeline.h"
#include "core/validation.h"
#include "kv/kv_settings.h"
#include "kv/kv_stall.h"

namespace synk::detail {

namespace {

// The engines whose pull callbacks or Updater calls run on this thread's stack (another
// engine's waits are free: it delivers on its own thread).
thread_local std::vector<const KvEngine*> delivering_here;

// InvalidUsage for a wait on `engine` made from one of its own pull callbacks (the message is
// made only then: pull_wait passes here on every call).
bool delivering_on_this_thread(const KvEngine* engine) {
  return std::find(delivering_here.begin(), delivering_here.end(), engine) != delivering_here.end();
}

void refuse_in_callback(const KvEngine* engine, const char* call, std::optional<int> key = {}) {
  if (!delivering_on_this_thread(engine)) return;
  const std::string what = key ? std::string(call) + "(" + key_text(*key) + ")" : call;
  throw Error(ErrorCode::InvalidUsage,
              "KeyValue::" + what + ": called from a pull callback or an Updater call, which "
              "run where the results are made and delivered: it would wait for itself. They "
              "may push and pull, not wait (pull_wait, close)");
}

// How long the engine pauses between cycles that reduced nothing while some rank still has a
// push waiting: short, since a late rank's push waits for the others' next cycle.
constexpr auto kPause = std::chrono::microseconds(500);

// The engines alive in this process. MPI_Finalize closes them first: one alive past the
// program's MPI_Finalize, as objects in main's scope are, made MPI calls after it (its cycles,
// its close), and MPI ended the job. Every rank finalizes, so the collective closes meet.
constinit ClosedAtFinalize<KvEngine> live_engines([](KvEngine& e) { e.close_engine(); },
                                                  "KeyValue");

KeyStatus status_of(const KeySlot& k, KvClock::time_point now, double warn_s, double timeout_s) {
  if (!k.push_pending) return kNotPushed;
  const double waited = std::chrono::duration<double>(now - k.pushed_at).count();
  return waited > timeout_s ? kTimedOut : waited > warn_s ? kStalled : kPushed;
}

}  // namespace

void KvEngine::run_user_code(const std::function<void()>& code) {
  const std::lock_guard turn(cycle_m_);
  const ScopedCallLabel label(CallLabel::user);  // the user's collectives, even in a cycle
  delivering_here.push_back(this);
  try {
    code();
  } catch (...) {
    delivering_here.pop_back();
    throw;
  }
  delivering_here.pop_back();
}

std::string key_text(int key) { return "key " + std::to_string(key); }

std::string key_track(int key) { return "KeyValue " + key_text(key); }

KvEngine::KvEngine(Communicator& comm, KeyValueOptions options)
    : user_(comm),
      engine_comm_(duplicate_for_engine(comm)),
      updater_(std::move(options.updater)),
      fusion_bytes_(kv_settings().fusion_bytes),
      partition_bytes_(kv_settings().partition_bytes),
      stall_warn_s_(settings().stall_warn_s),
      timeout_s_(settings().timeout_s),
      cycle_ms_(kv_settings().cycle_ms),
      // One rank waits for no one: its pushes are reduced in push itself (reduce_alone).
      background_(comm.size() > 1 && runs_in_background(engine_comm_)),
      owned_bytes_(static_cast<std::size_t>(comm.size()), 0) {
  // The buckets depend on SYNK_FUSION_BYTES: a rank that plans other ones pairs the wrong calls.
  Spread fusion({fusion_bytes_});
  engine_comm_.all_reduce(fusion.data(), fusion.data(), fusion.size(), DataType::uint64,
                          ReduceOp::max);
  if (!fusion.same(0)) {
    throw Error(ErrorCode::InvalidUsage,
                "KeyValue: the ranks have different SYNK_FUSION_BYTES (this rank " +
                    std::to_string(fusion_bytes_) + ", the largest " +
                    std::to_string(fusion.largest(0)) + ", the smallest " +
                    std::to_string(fusion.smallest(0)) + ")");
  }
  // No bucket larger than a part either: a key of higher priority waits for at most one.
  if (partition_bytes_ > 0) fusion_bytes_ = std::min(fusion_bytes_, partition_bytes_);
  // With a thread, the fusion buffer is made now, whole, on this thread: alloc is collective
  // and makes MPI calls, which the engine's thread must not; the shm backend's pages are only
  // backed where a cycle writes them. Without, it grows in the cycles as buckets need it.
  if (background_) {
    if (fusion_bytes_ > 0) fusion_ = engine_comm_.alloc(fusion_bytes_);
    thread_ = std::thread([this] { engine_loop(); });
  }
  live_engines.add(this);
}

KvEngine::~KvEngine() {
  // Destroyed by one of its own pull callbacks or its Updater, it would wait for the cycle that
  // runs that very callback, which would then go on in freed memory: the process ends, saying so.
  const bool own_thread = thread_.joinable() && thread_.get_id() == std::this_thread::get_id();
  if (own_thread || delivering_on_this_thread(this)) {
    SYNK_LOG_AT(error, "KeyValue destroyed by one of its own pull callbacks or its Updater: "
                       "it cannot wait for the cycle that runs them; the process ends");
    std::abort();
  }
  live_engines.remove(this);
  try {
    close_engine();
  } catch (const std::exception& e) {
    SYNK_LOG_AT(error, "KeyValue destroyed after a failure: " << e.what());
  } catch (...) {
    SYNK_LOG_AT(error, "KeyValue destroyed after a failure");
  }
  if (thread_.joinable()) thread_.join();
}

KeySlot& KvEngine::slot_of(int key, const char* op) {
  const auto it = index_.find(key);
  if (it == index_.end()) {
    throw Error(ErrorCode::InvalidUsage, std::string("KeyValue::") + op + ": " + key_text(key) +
                                             " was not declared (init_key)");
  }
  return slots_[it->second];
}

const KeySlot& KvEngine::declared(int key, const char* op) const {
  std::lock_guard lk(m_);
  return const_cast<KvEngine*>(this)->slot_of(key, op);
}

bool KvEngine::pull_open(int key) const {
  std::lock_guard lk(m_);
  return const_cast<KvEngine*>(this)->slot_of(key, "pulling").pull_open;
}

void KvEngine::throw_if_failed_locked() {
  if (!failed_) return;
  failure_seen_ = true;
  std::rethrow_exception(failed_);
}

int KvEngine::choose_owner(std::size_t bytes) {
  const auto least = std::min_element(owned_bytes_.begin(), owned_bytes_.end());
  *least += bytes;
  return static_cast<int>(least - owned_bytes_.begin());
}

void KvEngine::init_key(int key, std::size_t count, DataType dtype, ReduceOp op,
                        const void* weights) {
  {
    std::lock_guard lk(m_);
    throw_if_failed_locked();
    if (closing_) throw Error(ErrorCode::InvalidUsage, "KeyValue::init_key: the KeyValue is closed");
  }
  const int rank = user_.rank();
  std::string refused;
  std::optional<std::size_t> bytes;
  if (index_.count(key) != 0) {
    refused = key_text(key) + " is declared already";
  } else if (!is_valid(dtype) || !is_valid(op)) {
    refused = "not a valid dtype or op";
  } else if (op == ReduceOp::avg && !is_floating(dtype)) {
    // Refused here, not at the key's first all_reduce on the engine's thread, which ends the
    // KeyValue with an error about a call the user never made.
    refused = key_text(key) + ": op avg is not defined for integer dtype " + to_string(dtype) +
              " (it would truncate); use sum and divide";
  } else if (!(bytes = bytes_in_memory(count, 1, dtype))) {
    refused = key_text(key) + ": " + std::to_string(count) + " elements of " + to_string(dtype) +
              " do not fit in memory";
  } else if (updater_ && rank == 0 && weights == nullptr && count > 0) {
    refused = "with an Updater, rank 0 passes the key's initial weights (weights is null)";
  }
  // Every rank declares the same key, count, dtype and op, and knows whether one refused.
  const auto u = [](auto v) { return static_cast<std::uint64_t>(v); };
  Spread declared({u(key), u(count), u(dtype), u(op), refused.empty() ? 0u : 1u});
  {
    const ScopedCallLabel label(CallLabel::kv_init_key);
    user_.all_reduce(declared.data(), declared.data(), declared.size(), DataType::uint64,
                     ReduceOp::max);
  }
  if (!refused.empty()) throw Error(ErrorCode::InvalidArgument, "KeyValue::init_key: " + refused);
  if (declared.largest(4) != 0) {
    throw Error(ErrorCode::InvalidArgument,
                "KeyValue::init_key(" + key_text(key) + "): another rank's arguments were refused");
  }
  if (!declared.same(0) || !declared.same(1) || !declared.same(2) || !declared.same(3)) {
    throw Error(ErrorCode::InvalidUsage,
                "KeyValue::init_key: the ranks declared different keys (this rank: " +
                    key_text(key) + ", " + std::to_string(count) + " elements of " +
                    to_string(dtype) + ", " + to_string(op) +
                    "); every rank declares the same keys in the same order");
  }
  KeySlot s;
  s.key = key;
  s.count = count;
  s.dtype = dtype;
  s.op = op;
  s.bytes = *bytes;
  if (updater_) {
    s.owner = choose_owner(s.bytes);
    std::vector<std::byte> w(s.bytes);
    if (rank == 0 && s.bytes > 0) std::memcpy(w.data(), weights, s.bytes);
    const ScopedCallLabel label(CallLabel::kv_init_key);
    user_.broadcast(w.data(), s.bytes, DataType::uint8, 0);
    if (rank == s.owner) s.weights = std::move(w);
  }
  KeySlot* added = nullptr;
  {
    std::lock_guard lk(m_);
    s.index = slots_.size();
    index_[key] = s.index;
    added = &slots_.emplace_back(std::move(s));
    pending_slots_.push_back(0);
  }
  // After the slot exists on every rank: an init that throws fails this call on the owner
  // alone, and the slots stay the same on every rank.
  if (updater_ && rank == added->owner) {
    run_user_code([&] { updater_->init(key, KeyArray{added->weights.data(), count, dtype}); });
  }
}

void KvEngine::push(int key, const void* data, int priority) {
  KeySlot* slot = nullptr;
  {
    std::lock_guard lk(m_);
    throw_if_failed_locked();
    if (closing_) throw Error(ErrorCode::InvalidUsage, "KeyValue::push: the KeyValue is closed");
    KeySlot& k = slot_of(key, "push");
    if (data == nullptr && k.bytes > 0) {
      throw Error(ErrorCode::InvalidArgument, "KeyValue::push: " + key_text(key) + ": data is null");
    }
    if (k.awaiting_pull || k.has_queued) {
      throw Error(ErrorCode::InvalidUsage,
                  "KeyValue::push: " + key_text(key) +
                      " is pushed again before its pull (every push of a key is pulled before "
                      "its next push)");
    }
    ++pending_;
    if (k.push_pending || k.delivering) {  // its pull is there: the push starts after it
      k.queued = data;
      k.has_queued = true;
      k.queued_priority = priority;
      return;
    }
    start_push_locked(k, data, priority);
    slot = &k;
  }
  if (engine_comm_.size() == 1) {
    reduce_alone(*slot);
    return;
  }
  wake_.notify_one();  // no system call when the engine is not waiting
}

void KvEngine::start_push_locked(KeySlot& k, const void* data, int priority) {
  k.pushed = data;
  k.push_pending = true;
  pending_slots_[k.index] = 1;
  // A pull made before the push (and not being completed) waits for it.
  k.awaiting_pull = !(k.pull_open && !k.pull_done && !k.delivering);
  k.push_priority = priority;
  k.pushed_at = KvClock::now();
  k.warned = false;
  k.negotiated = false;
  if (timeline::on()) {
    timeline::instant(key_track(k.key), "pushed", k.bytes);
    k.pushed_ns = timeline::clock_ns();  // after the point: its "queued" span starts there
  }
  ++pushes_;
}

void KvEngine::start_shadow_push_locked(KeySlot& k) {
  if (k.shadow.size() != k.bytes) {
    k.shadow.resize(k.bytes);
    fill_identity(k.shadow.data(), k.count, k.dtype, k.op);
  }
  ++pending_;
  start_push_locked(k, k.shadow.data(), std::numeric_limits<int>::min());
  k.shadow_push = true;
  k.awaiting_pull = false;
}

bool KvEngine::start_queued_push_locked(KeySlot& k) {
  if (!k.has_queued) return false;
  k.has_queued = false;
  start_push_locked(k, k.queued, k.queued_priority);
  return true;
}

// One rank reduces at once; else the engine, asleep or pausing, learns of the push.
void KvEngine::after_queued_push(KeySlot& k) {
  if (engine_comm_.size() == 1) {
    reduce_alone(k);
  } else {
    wake_.notify_one();
  }
}

void KvEngine::pull(int key, void* out, int priority, std::function<void()> callback) {
  std::unique_lock lk(m_);
  throw_if_failed_locked();
  if (closing_) throw Error(ErrorCode::InvalidUsage, "KeyValue::pull: the KeyValue is closed");
  KeySlot& k = slot_of(key, "pull");
  if (k.pull_open) {
    throw Error(ErrorCode::InvalidUsage, "KeyValue::pull: " + key_text(key) +
                                             " is pulled again before pull_wait of its last pull");
  }
  if (out == nullptr && k.bytes > 0) {
    throw Error(ErrorCode::InvalidArgument, "KeyValue::pull: " + key_text(key) + ": out is null");
  }
  k.pull_open = true;
  k.pull_done = false;
  ++k.pull_serial;
  k.out = out;
  k.pull_priority = priority;
  k.callback = std::move(callback);
  k.awaiting_pull = false;
  if (!k.has_result) return;
  // The reduction came first: it is here already.
  if (k.bytes > 0) std::memcpy(out, k.result.data(), k.bytes);
  k.has_result = false;
  std::function<void()> run = std::move(k.callback);
  k.delivering = true;
  lk.unlock();
  std::exception_ptr thrown;
  try {
    if (run) run_user_code(run);
  } catch (...) {
    thrown = std::current_exception();
  }
  lk.lock();
  k.delivering = false;
  k.pull_done = true;
  const bool queued = start_queued_push_locked(k);
  lk.unlock();
  done_.notify_all();
  if (queued) after_queued_push(k);
  if (thrown) std::rethrow_exception(thrown);
}

void KvEngine::pull_wait(int key) {
  refuse_in_callback(this, "pull_wait", key);
  KeySlot* k = nullptr;
  std::uint64_t serial = 0;
  {
    std::lock_guard lk(m_);
    k = &slot_of(key, "pull_wait");
    serial = k->pull_serial;
    if (!k->pull_open) {
      throw Error(ErrorCode::InvalidUsage, "KeyValue::pull_wait: " + key_text(key) +
                                               " has no pull to wait for (pull, then pull_wait)");
    }
    if (!k->pull_done && !k->delivering && !k->push_pending && !failed_) {
      // Only this rank's push can make it ready: waiting would never end.
      throw Error(ErrorCode::InvalidUsage,
                  "KeyValue::pull_wait: " + key_text(key) +
                      " has not been pushed on this rank since its last result (push, pull, "
                      "pull_wait)");
    }
  }
  // Another thread's pull_wait may end this pull first (and a new pull begin): not ours then.
  const auto taken = [k, serial] { return !k->pull_open || k->pull_serial != serial; };
  if (!background_) run_cycles_until([&] { return k->pull_done || taken(); });
  std::unique_lock lk(m_);
  ++k->waiters;
  done_.wait(lk, [&] { return k->pull_done || taken() || failed_ || finished_; });
  --k->waiters;
  if (taken()) {
    if (failed_) throw_if_failed_locked();  // the engine's failure, not the other waiter
    throw Error(ErrorCode::InvalidUsage, "KeyValue::pull_wait: " + key_text(key) +
                                             ": another thread's pull_wait ended its pull");
  }
  k->pull_open = false;
  if (k->pull_done) {
    k->pull_done = false;
    if (k->waiters > 0) done_.notify_all();  // they see that the pull is over
    return;
  }
  throw_if_failed_locked();
  throw Error(ErrorCode::InvalidUsage,
              "KeyValue::pull_wait: " + key_text(key) + ": the KeyValue closed before its result");
}

void KvEngine::close() {
  refuse_in_callback(this, "close");
  close_engine();
}

void KvEngine::join() {
  refuse_in_callback(this, "join");
  {
    std::lock_guard lk(m_);
    throw_if_failed_locked();
    if (closing_ && !joined_) {
      throw Error(ErrorCode::InvalidUsage, "KeyValue::join: the KeyValue is closed");
    }
    joined_ = true;
  }
  close_engine();
}

// close() without the callback check: the destructor's and MPI_Finalize's, which must close
// whatever thread they run on (a KeyValue dropped inside another's callback, say).
void KvEngine::close_engine() {
  std::lock_guard closing(close_m_);  // a second close waits for the first
  {
    std::lock_guard lk(m_);
    if (closed_) return;
    if (!closing_) closing_since_ = KvClock::now();
    closing_ = true;
  }
  wake_.notify_all();
  if (background_) {
    if (thread_.joinable()) thread_.join();
  } else {
    run_cycles_until([this] { return finished_; });
  }
  std::lock_guard lk(m_);
  closed_ = true;
  if (failed_ && !failure_seen_) throw_if_failed_locked();
}

void KvEngine::fail(std::exception_ptr error) {
  {
    std::lock_guard lk(m_);
    if (!failed_) failed_ = std::move(error);
  }
  done_.notify_all();  // every waiter, whatever its key
}

// The engine's thread: a cycle whenever some rank has a push waiting, a pause after one that
// reduced nothing, asleep while no rank has anything to do.
void KvEngine::engine_loop() {
  // The shm waits of this thread sleep between polls (GroupConfig::sleep_when_waiting): with the
  // default timer slack (50 us) each sleep lasts up to that much longer than asked.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  bool active = false;
  bool progressed = false;
  const auto pause = std::max<KvClock::duration>(kPause, std::chrono::milliseconds(cycle_ms_));
  for (;;) {
    {
      std::unique_lock lk(m_);
      if (!active && !closing_) {
        // Asleep, but a cycle now and then even without a push of this rank's: another rank
        // that has pushed waits in a cycle for this one, and its stall inspector needs it
        // before that cycle's wait reaches SYNK_TIMEOUT.
        const double nap_s = std::min(stall_warn_s_, timeout_s_) / 2;
        const bool pushed = wake_.wait_for(lk, wait_duration(nap_s),
                                           [&] { return pending_ > 0 || closing_; });
        if (pushed && cycle_ms_ > 0 && !closing_) {  // gather the pushes that follow this one
          wake_.wait_for(lk, std::chrono::milliseconds(cycle_ms_), [&] { return closing_; });
        }
      } else if (!progressed) {
        const std::uint64_t seen = pushes_;
        wake_.wait_for(lk, pause, [&] { return pushes_ != seen; });
      }
    }
    CycleOutcome o;
    if (!try_cycle(o) || o.finished) return;
    active = o.group_active;
    progressed = o.progressed;
  }
}

// The cycles on the caller's thread (where the engine has no thread of its own). One thread
// runs them at a time; another one waits for its own condition meanwhile, and takes over when
// the first returns. (Holding the turn while waiting deadlocked two threads per rank: one whose
// key was done waited behind the other, so its rank never pushed the keys the other waited for.)
void KvEngine::run_cycles_until(const std::function<bool()>& done) {
  bool progressed = true;
  for (;;) {
    std::unique_lock turn(cycle_m_, std::defer_lock);
    {
      std::unique_lock lk(m_);
      const auto stop = [&] { return done() || failed_ || finished_; };
      if (stop()) return;
      if (!turn.try_lock()) {
        done_.wait_for(lk, kPause, stop);
        continue;
      }
      if (!progressed) wake_.wait_for(lk, kPause);
    }
    CycleOutcome o;
    if (!try_cycle(o)) return;
    progressed = o.progressed;
  }
}

// A cycle whose failure fails the engine (every pull and later call rethrows it): false then.
bool KvEngine::try_cycle(CycleOutcome& o) {
  try {
    o = run_cycle();
    return true;
  } catch (...) {
    fail(std::current_exception());
    return false;
  }
}

// The keys every rank has pushed, with their priorities: a byte per slot (max: 0 means every rank
// has pushed it), then, for two or more, the ready keys' priorities (max over the ranks of push
// + pull priority). by_slot gets each ready slot's key. Every rank makes the same calls: the
// second's count comes from the first's result.
std::vector<ReadyKey> KvEngine::agree_on_ready(std::size_t n, std::vector<KeySlot*>& by_slot,
                                               bool shadow) {
  std::vector<std::uint8_t> not_pushed(n, 1);
  {
    std::lock_guard lk(m_);
    for (std::size_t i = 0; i < n && i < pending_slots_.size(); ++i) {
      // A joined rank has every key it can push at once: not one whose pull's callback runs,
      // or whose own next push waits behind it (that push comes, and counts).
      const KeySlot& k = slots_[i];
      const bool can_shadow = shadow && !k.delivering && !k.has_queued;
      not_pushed[i] = pending_slots_[i] == 0 && !can_shadow ? 1 : 0;
    }
  }
  engine_comm_.all_reduce(not_pushed.data(), not_pushed.data(), n, DataType::uint8,
                          ReduceOp::max);
  std::vector<ReadyKey> ready;
  {
    std::lock_guard lk(m_);  // a deque's elements stay where they are; its index does not
    for (std::size_t i = 0; i < n; ++i) {
      if (not_pushed[i] != 0) continue;
      KeySlot& k = slots_[i];
      if (shadow && !k.push_pending) start_shadow_push_locked(k);  // (not delivering: above)
      by_slot[i] = &k;
      ready.push_back({i, 0, k.bytes, k.dtype, k.op, k.owner, split(k)});
    }
  }
  // One key alone has no order to agree on: every rank found the same ready keys. (A large key
  // in parts runs so, part after part, until another key is pushed.)
  if (ready.size() <= 1) return ready;
  std::vector<std::int64_t> priority(ready.size());
  {
    std::lock_guard lk(m_);  // a pull made since adds its priority
    for (std::size_t j = 0; j < ready.size(); ++j) {
      const KeySlot& k = *by_slot[ready[j].slot];
      const bool pulled = k.pull_open && !k.pull_done;
      priority[j] = std::int64_t{k.push_priority} + (pulled ? k.pull_priority : 0);
    }
  }
  engine_comm_.all_reduce(priority.data(), priority.data(), priority.size(), DataType::int64,
                          ReduceOp::max);
  for (std::size_t j = 0; j < ready.size(); ++j) ready[j].priority = priority[j];
  return ready;
}

bool KvEngine::split(const KeySlot& k) const {
  return partition_bytes_ > 0 && k.bytes > partition_bytes_;
}

KvEngine::CycleOutcome KvEngine::run_cycle() {
  // A Timeout of these calls names the cycle: the user made none of them.
  const ScopedCallLabel label(CallLabel::kv_cycle);
  std::int64_t header[6] = {};
  bool joined = false;  // as the header says, though join() may come meanwhile
  {
    std::lock_guard lk(m_);
    const auto now = KvClock::now();
    bool stalled = false;
    std::size_t shadows = 0;  // this joined rank's shadow pushes among the pending ones
    for (std::size_t i = 0; i < pending_slots_.size(); ++i) {
      if (pending_slots_[i] == 0) continue;
      const KeySlot& k = slots_[i];
      const KeyStatus s = status_of(k, now, stall_warn_s_, timeout_s_);
      stalled = stalled || s == kTimedOut || (s == kStalled && !k.warned);
      shadows += k.shadow_push ? 1 : 0;
    }
    header[0] = static_cast<std::int64_t>(slots_.size());
    header[1] = pending_ > 0 ? 1 : 0;
    header[2] = closing_ ? 0 : 1;
    header[3] = stalled ? 1 : 0;
    header[4] = closing_ ? 1 : 0;
    // Shadowing goes on while a rank has not joined, or has a push of its own still to reduce
    // (pushed just before its join): the last rank to join may have one.
    header[5] = !joined_ || pending_ > shadows ? 1 : 0;
    joined = joined_;
  }
  engine_comm_.all_reduce(header, header, 6, DataType::int64, ReduceOp::max);
  const auto n = static_cast<std::size_t>(header[0]);
  const bool all_closing = header[2] == 0;
  const bool some_closing = header[4] != 0;
  CycleOutcome o;
  o.group_active = header[1] != 0;
  // With a push waiting somewhere, the stall inspector names the keys and ranks instead.
  if (!o.group_active) refuse_endless_close(all_closing);
  if (o.group_active) {
    std::vector<KeySlot*> by_slot(n, nullptr);
    const std::vector<ReadyKey> ready = agree_on_ready(n, by_slot, joined && header[5] != 0);
    if (timeline::on()) trace_ready(ready, by_slot);
    // Once every rank closes, a cycle runs everything that is ready, whole.
    run_buckets(ready, by_slot, all_closing);
    o.progressed = !ready.empty();
  }
  if (o.progressed && timeline::on()) timeline::flush();
  // A rank that closes never pushes again: a key it has not pushed fails now, not at the
  // SYNK_TIMEOUT of the ranks waiting for it.
  if (header[3] != 0 || (some_closing && o.group_active)) inspect(n, all_closing);
  // The cycles end once every rank has closed and none has a push left: a delivery of this
  // cycle may have started a push queued behind its pull, which the next cycle reduces.
  if (all_closing && !o.group_active) {
    o.finished = true;
    {
      std::lock_guard lk(m_);
      finished_ = true;
    }
    done_.notify_all();
  }
  return o;
}

// A close that has waited SYNK_TIMEOUT for a rank that keeps this KeyValue open (it closes
// others first, in another order, or never) fails, as every wait of synk's own does.
void KvEngine::refuse_endless_close(bool all_closing) {
  std::lock_guard lk(m_);
  // A rank that joined waits, as Horovod's join does, for the others' last push, however far.
  if (!closing_ || all_closing || joined_) return;
  const double waited = std::chrono::duration<double>(KvClock::now() - closing_since_).count();
  if (waited <= timeout_s_) return;
  throw Error(ErrorCode::Timeout,
              "KeyValue::close: some rank has not closed this KeyValue within " +
                  seconds_text(timeout_s_) + " (SYNK_TIMEOUT): every rank closes its "
                  "KeyValues, in the same order");
}

// Every rank's status of every slot, and whether it has closed; warns of (or fails) the keys
// that some ranks pushed long ago and others have not. A key that a rank which has closed has
// not pushed fails at once: that rank never pushes again.
void KvEngine::inspect(std::size_t n, bool closing_everywhere) {
  std::vector<std::uint8_t> mine(n + 1, kNotPushed);  // the last byte: this rank has closed
  std::vector<int> keys(n);
  {
    std::lock_guard lk(m_);
    const auto now = KvClock::now();
    for (std::size_t i = 0; i < n; ++i) {
      keys[i] = static_cast<int>(i);  // a slot this rank has not declared yet: its number
      if (i >= slots_.size()) continue;
      keys[i] = slots_[i].key;
      mine[i] = status_of(slots_[i], now, stall_warn_s_, timeout_s_);
      // A push queued behind its pull's callback starts in a moment, closed or not.
      if (mine[i] == kNotPushed && slots_[i].has_queued) mine[i] = kPushed;
    }
    mine[n] = joined_ ? 2 : closing_ ? 1 : 0;
  }
  const int size = engine_comm_.size();
  std::vector<std::uint8_t> rows(mine.size() * static_cast<std::size_t>(size));
  engine_comm_.all_gather(mine.data(), rows.data(), mine.size(), DataType::uint8);
  std::vector<std::uint8_t> all;  // the status rows without the closed byte
  std::vector<bool> closed, joined;
  for (int r = 0; r < size; ++r) {
    const auto row = rows.begin() + static_cast<std::ptrdiff_t>(r * (n + 1));
    all.insert(all.end(), row, row + static_cast<std::ptrdiff_t>(n));
    closed.push_back(row[static_cast<std::ptrdiff_t>(n)] == 1);
    joined.push_back(row[static_cast<std::ptrdiff_t>(n)] == 2);
  }
  count_joined_as_pushed(all, joined, n);
  const std::vector<StalledKey> part_keys = find_stalled(all, size, keys, kPushed);
  std::string never;  // the keys that can never be reduced
  for (const StalledKey& k : part_keys) {
    const std::string why = closing_everywhere ? closed_error(k) : closed_unpushed_error(k, closed);
    if (!why.empty()) never += (never.empty() ? "" : "; ") + why;
  }
  if (!never.empty()) throw Error(ErrorCode::InvalidUsage, never);
  const std::string timed_out = warn_of_stalls(part_keys, mine);
  if (!timed_out.empty()) throw Error(ErrorCode::Timeout, timed_out);
}

std::string KvEngine::warn_of_stalls(const std::vector<StalledKey>& part_keys,
                                     const std::vector<std::uint8_t>& mine) {
  std::string errors;
  const int rank = engine_comm_.rank();
  for (const StalledKey& k : part_keys) {
    if (k.worst < kStalled) continue;  // waiting, not for long
    if (k.worst == kTimedOut) {
      errors += (errors.empty() ? "" : "; ") + stall_error(k, timeout_s_);
      continue;
    }
    // Every rank marks the key as warned of, so that one line is all: a rank whose own wait
    // passes SYNK_STALL_WARN later does not start another inspection of it.
    std::lock_guard lk(m_);
    if (k.column >= slots_.size()) continue;  // not declared here yet
    const bool warned_before = slots_[k.column].warned;
    slots_[k.column].warned = true;
    if (k.reporter == rank && !warned_before) {
      SYNK_LOG_AT(warn, stall_warning(k, stall_warn_s_, timeout_s_));
    }
  }
  std::lock_guard lk(m_);
  for (std::size_t i = 0; i + 1 < mine.size() && i < slots_.size(); ++i) {
    if (mine[i] >= kStalled) slots_[i].warned = true;
  }
  return errors;
}

}  // namespace synk::detail
