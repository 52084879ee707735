// How a KeyValue cycle runs its buckets (kv_plan.h): a fused bucket through the fusion buffer,
// a key alone in place, the owner's update between a reduce and a broadcast, and the delivery
// of the results to the pulls. Part of KvEngine (kv_engine.h).
#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <vector>

#include "core/logging.h"
#include "core/timeline.h"
#include "kv/kv_engine.h"
#include "synk/agreement.h"

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

// The collective of a key or of a bucket: all_reduce; or, with an owner, reduce to it, its
// update of the reduced values (`update`, run on the owner only), and broadcast of the result.
void KvEngine::reduce_and_update(const void* send, void* recv, std::size_t count, DataType dtype,
                                 ReduceOp op, int owner,
                                 const std::function<std::exception_ptr()>& update) {
  if (owner < 0) {
    engine_comm_.all_reduce(send, recv, count, dtype, op);
    return;
  }
  engine_comm_.reduce(send, recv, count, dtype, op, owner);
  agree_on_update(engine_comm_.rank() == owner ? update() : nullptr);
  engine_comm_.broadcast(recv, count, dtype, owner);
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
  const auto update_keys = [&] {
    std::exception_ptr failed;
    std::size_t at = 0;
    for (KeySlot* k : keys) {
      if (!failed) failed = update_on_owner(*k, base + at);
      at += k->bytes;
    }
    return failed;
  };
  try {
    reduce_and_update(base, base, b.bytes / size_of(b.dtype), b.dtype, b.op, b.owner,
                      update_keys);
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

// The buckets of the ready keys, highest priority first. Unless `whole`, the cycle starts no
// more once it has moved the partition size: the keys left stay pending, and the next cycle
// plans them again beside the keys pushed meanwhile. Every rank plans and stops alike.
void KvEngine::run_buckets(const std::vector<ReadyKey>& ready,
                           const std::vector<KeySlot*>& by_slot, bool whole) {
  const std::size_t budget = whole ? 0 : partition_bytes_;
  std::size_t moved = 0;
  for (const Bucket& b : plan_buckets(ready, fusion_bytes_)) {
    if (budget > 0 && moved >= budget) return;
    std::vector<KeySlot*> keys;
    for (std::size_t s : b.slots) keys.push_back(by_slot[s]);
    if (b.fused && keys.size() > 1) {
      run_fused(b, keys);
      moved += b.bytes;
      continue;
    }
    for (KeySlot* k : keys) {
      if (split(*k)) {
        moved += run_part(*k, budget);
        // Whole: an Updater's key goes on to its broadcast round in this cycle too.
        if (whole && k->owner >= 0 && k->parts_done == k->bytes) moved += run_part(*k, budget);
      } else {
        run_alone(*k);
        moved += k->bytes;
      }
    }
  }
}

// A split key's next part, reduced in place at its offset. All ranks run the same parts: each
// part's size follows from the key and the partition size alone. With an Updater the key goes
// twice: its parts reduced to the owner, the owner's update of the whole key after the last,
// then its parts broadcast from the owner (parts_done counts both rounds).
std::size_t KvEngine::run_part(KeySlot& k, std::size_t part_bytes) {
  if (k.parts_done == 0) {
    std::lock_guard lk(m_);
    if (k.pull_open && !k.pull_done) {
      k.parts_dest = k.out;
    } else {
      k.result.resize(k.bytes);
      k.parts_dest = k.result.data();
    }
  }
  const bool updated = k.owner >= 0;
  const bool broadcasting = updated && k.parts_done >= k.bytes;
  const std::size_t offset = broadcasting ? k.parts_done - k.bytes : k.parts_done;
  const std::size_t element = size_of(k.dtype);
  const std::size_t left = k.bytes - offset;
  const std::size_t part =
      part_bytes == 0 ? left : std::min(left, std::max(element, part_bytes / element * element));
  const auto* send = static_cast<const std::byte*>(k.pushed) + offset;
  auto* dest = static_cast<std::byte*>(k.parts_dest) + offset;
  const bool traced = timeline::on();
  if (traced) timeline::begin(key_track(k.key), "part", part);
  try {
    if (!updated) {
      engine_comm_.all_reduce(send, dest, part / element, k.dtype, k.op);
    } else if (!broadcasting) {
      engine_comm_.reduce(send, dest, part / element, k.dtype, k.op, k.owner);
      if (offset + part == k.bytes) {
        const bool owner = engine_comm_.rank() == k.owner;
        agree_on_update(owner ? update_on_owner(k, k.parts_dest) : nullptr);
      }
    } else {
      engine_comm_.broadcast(dest, part / element, k.dtype, k.owner);
    }
  } catch (...) {
    if (traced) timeline::end(key_track(k.key));
    throw;
  }
  if (traced) timeline::end(key_track(k.key));
  k.parts_done += part;
  if (offset + part == k.bytes && (!updated || broadcasting)) deliver({&k}, {k.parts_dest});
  return part;
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
    reduce_and_update(k.pushed, dest, k.count, k.dtype, k.op, k.owner,
                      [&] { return update_on_owner(k, dest); });
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
    KeySlot& k = *by_slot[r.slot];
    if (k.negotiated) continue;  // a key left for the next cycle, or split, is found again
    k.negotiated = true;
    timeline::async_span(key_track(k.key), "queued", k.pushed_ns, k.bytes);
    timeline::instant(key_track(k.key), "negotiated", k.bytes);
  }
}

// On the owner: `reduced` holds the key's reduced gradient; it leaves holding the new weights.
// Returns what the Updater threw, if it did (the weights are then as the Updater left them).
std::exception_ptr KvEngine::update_on_owner(KeySlot& k, void* reduced) {
  try {
    run_user_code([&] {
      updater_->update(k.key, KeyArray{reduced, k.count, k.dtype},
                       KeyArray{k.weights.data(), k.count, k.dtype});
    });
  } catch (const std::exception& e) {
    // A synk error (a Python Updater's exception among them) without its "synk Code: ".
    const auto* synk_error = dynamic_cast<const Error*>(&e);
    return std::make_exception_ptr(
        Error(ErrorCode::InvalidUsage, "KeyValue: the Updater of " + key_text(k.key) +
                                           " threw: " + (synk_error ? synk_error->message()
                                                                    : std::string(e.what()))));
  } catch (...) {
    return std::make_exception_ptr(Error(
        ErrorCode::InvalidUsage, "KeyValue: the Updater of " + key_text(k.key) + " threw"));
  }
  if (k.bytes > 0) std::memcpy(reduced, k.weights.data(), k.bytes);
  return {};
}

// Between an owner's updates and their broadcast: every rank learns whether the owner's Updater
// threw (`failed`, the owner's), and then every rank fails (the owner with the Updater's error,
// the others with its text), instead of the others waiting in the broadcast.
void KvEngine::agree_on_update(const std::exception_ptr& failed) {
  std::string text;
  if (failed) {
    try {
      std::rethrow_exception(failed);
    } catch (const Error& e) {  // update_on_owner's, whatever the Updater threw
      text = e.message();
    }
  }
  const std::optional<RankFailure> owner = first_failure(engine_comm_, failed != nullptr, text);
  if (!owner) return;
  if (failed) std::rethrow_exception(failed);
  throw Error(ErrorCode::Remote, "KeyValue: the Updater threw on rank " +
                                     std::to_string(owner->rank) +
                                     ", the owner of keys of this cycle: " + owner->text);
}

// Each key's result is at its src: into its pull's buffer (then its callback), or kept for the
// pull. One bucket at a time, under one lock and with one wake-up: a waiter woken per key took
// turns with this thread on the rank's core, key after key.
void KvEngine::deliver(const std::vector<KeySlot*>& keys, const std::vector<const void*>& srcs) {
  if (timeline::on()) {
    for (const KeySlot* k : keys) timeline::instant(key_track(k->key), "done", k->bytes);
  }
  std::vector<std::pair<KeySlot*, std::function<void()>>> callbacks;
  std::vector<KeySlot*> queued;  // their queued pushes started
  bool wake = false;
  {
    std::lock_guard lk(m_);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      KeySlot& k = *keys[i];
      const bool shadow = k.shadow_push;
      k.shadow_push = false;
      k.push_pending = false;
      k.parts_done = 0;  // also where one rank's push delivered a key a cycle had begun
      k.parts_dest = nullptr;
      pending_slots_[k.index] = 0;
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
        if (start_queued_push_locked(k)) queued.push_back(&k);
        continue;
      }
      if (shadow) continue;  // a joined rank's: no pull of its own comes
      if (srcs[i] != k.result.data()) {
        const auto* p = static_cast<const std::byte*>(srcs[i]);
        k.result.assign(p, p + k.bytes);
      }
      k.has_result = true;
    }
  }
  if (callbacks.empty()) {
    if (wake) done_.notify_all();
    for (KeySlot* k : queued) after_queued_push(*k);
    return;
  }
  for (auto& [k, callback] : callbacks) {
    try {
      run_user_code(callback);
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
      if (start_queued_push_locked(*k)) queued.push_back(k);
    }
  }
  done_.notify_all();
  for (KeySlot* k : queued) after_queued_push(*k);
}

}  // namespace synk::detail
