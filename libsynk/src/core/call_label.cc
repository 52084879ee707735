// See call_label.h.
#include "core/call_label.h"

namespace synk::detail {

namespace {
thread_local CallLabel current = CallLabel::user;
}  // namespace

const char* to_string(CallLabel label) {
  switch (label) {
    case CallLabel::kv_init_key:
      return "KeyValue::init_key";
    case CallLabel::user:
      break;
  }
  return "";
}

CallLabel current_call_label() { return current; }

ScopedCallLabel::ScopedCallLabel(CallLabel label) : outer_(current) { current = label; }

ScopedCallLabel::~ScopedCallLabel() { current = outer_; }

std::string labeled_call(CallLabel label, const std::string& call) {
  const std::string name = to_string(label);
  return name.empty() ? call : name + " (its " + call + ")";
}

}  // namespace synk::detail
