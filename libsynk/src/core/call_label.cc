// See call_label.h.
#include "core/call_label.h"

#include <atomic>

namespace synk::detail {

namespace {
thread_local CallLabel current = CallLabel::user;
// Labels alive in any thread: while none is, every call is the user's, known without the
// thread_local's lookup (a shared library's costs a call on every collective).
std::atomic<int> labels_alive{0};
}  // namespace

const char* to_string(CallLabel label) {
  switch (label) {
    case CallLabel::kv_init_key:
      return "KeyValue::init_key";
    case CallLabel::kv_cycle:
      return "a KeyValue cycle";
    case CallLabel::user:
      break;
  }
  return "";
}

CallLabel current_call_label() {
  return labels_alive.load(std::memory_order_relaxed) == 0 ? CallLabel::user : current;
}

ScopedCallLabel::ScopedCallLabel(CallLabel label) : outer_(current) {
  labels_alive.fetch_add(1, std::memory_order_relaxed);
  current = label;
}

ScopedCallLabel::~ScopedCallLabel() {
  current = outer_;
  labels_alive.fetch_sub(1, std::memory_order_relaxed);
}

std::string labeled_call(CallLabel label, const std::string& call) {
  const std::string name = to_string(label);
  return name.empty() ? call : name + " (its " + call + ")";
}

}  // namespace synk::detail
