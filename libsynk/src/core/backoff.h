// The pause of a polling wait that may run with more ranks than cores: spin briefly, then yield
// the core, then sleep, so a rank that waits long does not starve the one it waits for.
#pragma once

#include <chrono>
#include <thread>

namespace synk::detail {

// Call once per unsuccessful poll; `spins` counts the polls of this wait (start it at 0).
inline void backoff(int& spins) {
  if (++spins < 64) return;
  if (spins < 1024) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace synk::detail
