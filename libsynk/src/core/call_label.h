// What a collective is part of when synk itself makes it on the user's communicator (KeyValue's
// init_key agrees on the key with an all_reduce): call comparisons and their Timeouts name that
// call, since the user never called the collective.
#pragma once

#include <cstdint>
#include <string>

namespace synk::detail {

enum class CallLabel : std::int32_t {
  user = 0,     // the user's own call
  kv_init_key,  // KeyValue::init_key
  kv_cycle,     // a KeyValue cycle: which keys every rank has pushed, and their reductions
};

// "KeyValue::init_key", or "" for the user's own call (and for a value it does not know).
const char* to_string(CallLabel label);

// The label of the calls this thread makes now.
CallLabel current_call_label();

// Labels this thread's calls while it lives.
class ScopedCallLabel {
 public:
  explicit ScopedCallLabel(CallLabel label);
  ~ScopedCallLabel();
  ScopedCallLabel(const ScopedCallLabel&) = delete;
  ScopedCallLabel& operator=(const ScopedCallLabel&) = delete;

 private:
  CallLabel outer_;
};

// "KeyValue::init_key (its all_reduce(count 9, int64, max))", or `call` for the user's own.
std::string labeled_call(CallLabel label, const std::string& call);

}  // namespace synk::detail
