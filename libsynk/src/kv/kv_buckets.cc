// How a KeyValue cycle runs its buckets (kv_plan.h): a fused bucket through the fusion buffer,
// a key alone in place, the owner's update between a reduce and a broadcast, and the delivery
// of the results to the pulls. Part of KvEngine (kv_engine.h).
#include <algorithm>
#include <cstring>
#include <exception>
#include <vector>

#include "core/logging.h"
#include "core/timeline.h"
#include "kv/kv_engine.h"

namespace synk::detail {

// One rank: the reduction of a push is the push itself (with an Updater, the update of it). In
// the cycles' turn, so that a cycle run meanwhile by a thread in pull_wait or close does not
// reduce the key a second time.
void KvEngine::reduce_alone(KeySlot& k) {
  std::lock_guard turn(cycle_m_);
  {
    std::lock_guard lk(m_);
    if (!k.push_pending) return;  // a cycle took it first
  }
  const void* src = k.pushed;
  if (k.owner >= 0) {
    std::vector<std::byte> reduced(static_cast<const std::byte*>(k.pushed),
                                   static_cast<const std::byte*>(k.pushed) + k.bytes);
    if (std::exception_ptr failed = update_on_owner(k, reduced.data())) {
      fail(failed);
      std::rethrow_exception(failed);
    }
    src = k.weights.data();
  }
  deliver({&k}, {src});
}

// The bucket's collective on its bytes at `base`: all_reduce, or reduce to its owner, the
// owner's update, and broadcast.
void KvEngine::reduce_bucket(const Bucket& b, const std::vector<KeySlot*>& keys, std::byte* base) {
  const std::size_t count = b.bytes / size_of(b.dtype);
  if (b.owner < 0) {
    engine_comm_.all_reduce(base, base, count, b.dtype, b.op);
    return;
  }
  engine_comm_.reduce(base, base, count, b.dtype, b.op, b.owner);
  std::exception_ptr failed;
  if (engine_comm_.rank() == b.owner) {
    std::size_t offset = 0;
    for (KeySlot* k : keys) {
      if (!failed) failed = update_on_owner(*k, base + offset);
      offset += k->bytes;
    }
  }
  agree_on_update(failed, b.owner);
  engine_comm_.broadcast(base, count, b.dtype, b.owner);
}

void KvEngine::run_fused(const Bucket& b, const std::vector<KeySlot*>& keys) {
  if (fusion_.size() < b.bytes) {  // only without a thread (see the constructor)
    const std::size_t grown = std::min(fusion_bytes_, std::max(b.bytes, 2 * fusion_.size()));
    fusion_ = engine_comm_.alloc(grown);
  }
  const bool traced = timeline::on();
  if (traced) {
    timeline::begin("KeyValue fusion", "fused", b.bytes);
    for (const KeySlot* k : keys) timeline::begin(key_track(k->key), "fused", k->bytes);
  }
  auto* base = static_cast<std::byte*>(fusion_.data());
  std::size_t offset = 0;
  for (const KeySlot* k : keys) {
    std::memcpy(base + offset, k->pushed, k->bytes);
    offset += k->bytes;
  }
  const auto end_spans = [&] {  // also where the bucket's collective failed: no span left open
    if (!traced) return;
    timeline::end("KeyValue fusion");
    for (const KeySlot* k : keys) timeline::end(key_track(k->key));
  };
  try {
    reduce_bucket(b, keys, base);
  } catch (...) {
    end_spans();
    throw;
  }
  end_spans();
  std::vector<const void*> srcs;
  offset = 0;
  for (const KeySlot* k : keys) {
    srcs.push_back(base + offset);
    offset += k->bytes;
  }
  deliver(keys, srcs);
}

// A key's collective into dest: all_reduce, or reduce to its owner, the update, and broadcast.
void KvEngine::reduce_key(KeySlot& k, void* dest) {
  if (k.owner < 0) {
    engine_comm_.all_reduce(k.pushed, dest, k.count, k.dtype, k.op);
    return;
  }
  engine_comm_.reduce(k.pushed, dest, k.count, k.dtype, k.op, k.owner);
  std::exception_ptr failed;
  if (engine_comm_.rank() == k.owner) failed = update_on_owner(k, dest);
  agree_on_update(failed, k.owner);
  engine_comm_.broadcast(dest, k.count, k.dtype, k.owner);
}

// A key on its own: reduced straight into its pull's buffer when the pull is there already.
void KvEngine::run_alone(KeySlot& k) {
  void* dest = nullptr;
  {
    std::lock_guard lk(m_);
    if (k.pull_open && !k.pull_done) {
      dest = k.out;
    } else {
      k.result.resize(k.bytes);
      dest = k.result.data();
    }
  }
  const bool traced = timeline::on();
  if (traced) timeline::begin(key_track(k.key), "running", k.bytes);
  try {
    reduce_key(k, dest);
  } catch (...) {
    if (traced) timeline::end(key_track(k.key));  // no span left open where it failed
    throw;
  }
  if (traced) timeline::end(key_track(k.key));
  deliver({&k}, {dest});
}

// On the timeline: each ready key's wait from its push to the cycle that found every rank had
// pushed it ("queued", an async span: the waits of several keys overlap).
void KvEngine::trace_ready(const std::vector<ReadyKey>& ready,
                           const std::vector<KeySlot*>& by_slot) {
  for (const ReadyKey& r : ready) {
    const KeySlot& k = *by_slot[r.slot];
    timeline::async_span(key_track(k.key), "queued", k.pushed_ns, k.bytes);
    timeline::instant(key_track(k.key), "negotiated", k.bytes);
  }
}

// On the owner: `reduced` holds the key's reduced gradient; it leaves holding the new weights.
// Returns what the Updater threw, if it did (the weights are then as the Updater left them).
std::exception_ptr KvEngine::update_on_owner(KeySlot& k, void* reduced) {
  try {
    updater_->update(k.key, KeyArray{reduced, k.count, k.dtype},
                     KeyArray{k.weights.data(), k.count, k.dtype});
  } catch (const std::exception& e) {
    return std::make_exception_ptr(Error(ErrorCode::InvalidUsage, "KeyValue: the Updater of " +
                                                                      key_text(k.key) +
                                                                      " threw: " + e.what()));
  } catch (...) {
    return std::make_exception_ptr(Error(
        ErrorCode::InvalidUsage, "KeyValue: the Updater of " + key_text(k.key) + " threw"));
  }
  if (k.bytes > 0) std::memcpy(reduced, k.weights.data(), k.bytes);
  return {};
}

// Between an owner's updates and their broadcast: every rank learns whether the owner's Updater
// threw, and then every rank fails (the owner with the Updater's error, the others with its
// text), instead of the others waiting in the broadcast.
void KvEngine::agree_on_update(const std::exception_ptr& failed, int owner) {
  std::int64_t thrown = failed ? 1 : 0;
  engine_comm_.all_reduce(&thrown, &thrown, 1, DataType::int64, ReduceOp::max);
  if (thrown == 0) return;
  std::string text;  // the owner's, for the others: the Updater's own words
  if (failed) {
    try {
      std::rethrow_exception(failed);
    } catch (const Error& e) {
      text = e.message();
    } catch (...) {
    }
  }
  std::uint64_t length = text.size();
  engine_comm_.broadcast(&length, 1, DataType::uint64, owner);
  text.resize(length);
  engine_comm_.broadcast(text.data(), length, DataType::uint8, owner);
  if (failed) std::rethrow_exception(failed);
  throw Error(ErrorCode::Remote, "KeyValue: the Updater threw on rank " + std::to_string(owner) +
                                     ", the owner of keys of this cycle: " + text);
}

// Each key's result is at its src: into its pull's buffer (then its callback), or kept for the
// pull. One bucket at a time, under one lock and with one wake-up: a waiter woken per key took
// turns with this thread on the rank's core, key after key.
void KvEngine::deliver(const std::vector<KeySlot*>& keys, const std::vector<const void*>& srcs) {
  if (timeline::on()) {
    for (const KeySlot* k : keys) timeline::instant(key_track(k->key), "done", k->bytes);
  }
  std::vector<std::pair<KeySlot*, std::function<void()>>> callbacks;
  bool wake = false;
  {
    std::lock_guard lk(m_);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      KeySlot& k = *keys[i];
      k.push_pending = false;
      --pending_;
      if (k.pull_open && !k.pull_done) {
        if (k.out != srcs[i] && k.bytes > 0) std::memcpy(k.out, srcs[i], k.bytes);
        if (k.callback) {
          k.delivering = true;
          callbacks.emplace_back(&k, std::move(k.callback));
          continue;
        }
        k.pull_done = true;
        wake = wake || k.waiters > 0;
        continue;
      }
      if (srcs[i] != k.result.data()) {
        const auto* p = static_cast<const std::byte*>(srcs[i]);
        k.result.assign(p, p + k.bytes);
      }
      k.has_result = true;
    }
  }
  if (callbacks.empty()) {
    if (wake) done_.notify_all();
    return;
  }
  for (auto& [k, callback] : callbacks) {
    try {
      run_pull_callback(this, callback);
    } catch (const std::exception& e) {
      SYNK_LOG_AT(error, "KeyValue: the pull callback of " << key_text(k->key)
                                                           << " threw: " << e.what());
    } catch (...) {
      SYNK_LOG_AT(error, "KeyValue: the pull callback of "
                             << key_text(k->key) << " threw something not a std::exception");
    }
  }
  {
    std::lock_guard lk(m_);
    for (auto& [k, callback] : callbacks) {
      k->delivering = false;
      k->pull_done = true;
    }
  }
  done_.notify_all();
}

}  // namespace synk::detail
