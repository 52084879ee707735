// synk::KeyValue (synk/key_value.h): the public face of KvEngine.
#include "synk/key_value.h"

#include "kv/kv_engine.h"

namespace synk {

KeyValue::KeyValue(Communicator& comm, KeyValueOptions options)
    : engine_(std::make_unique<detail::KvEngine>(comm, std::move(options))) {}

KeyValue::~KeyValue() = default;

void KeyValue::init_key(int key, std::size_t count, DataType dtype, ReduceOp op,
                        const void* weights) {
  engine_->init_key(key, count, dtype, op, weights);
}

void KeyValue::push(int key, const void* data, int priority) {
  engine_->push(key, data, priority);
}

void KeyValue::pull(int key, void* out, int priority, std::function<void()> callback) {
  engine_->pull(key, out, priority, std::move(callback));
}

void KeyValue::pull_wait(int key) { engine_->pull_wait(key); }

void KeyValue::close() { engine_->close(); }

void KeyValue::join() { engine_->join(); }

std::size_t KeyValue::count(int key) const { return engine_->declared(key, "count").count; }

DataType KeyValue::dtype(int key) const { return engine_->declared(key, "dtype").dtype; }

int KeyValue::owner(int key) const { return engine_->declared(key, "owner").owner; }

bool KeyValue::pulling(int key) const { return engine_->pull_open(key); }

void KeyValue::check_typed(int key, std::size_t count, DataType dtype, const char* op) const {
  const detail::KeySlot& k = engine_->declared(key, op);
  if (k.count != count || k.dtype != dtype) {
    throw Error(ErrorCode::InvalidArgument,
                std::string("KeyValue::") + op + ": key " + std::to_string(key) + " holds " +
                    std::to_string(k.count) + " elements of " + to_string(k.dtype) + ", not " +
                    std::to_string(count) + " of " + to_string(dtype));
  }
}

}  // namespace synk
