// Polling waits: their deadline (SYNK_TIMEOUT is a double of seconds), and their pause when
// ranks may outnumber cores: spin briefly, then yield the core, then sleep, so a rank that waits
// long does not starve the one it waits for.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

namespace synk::detail {

// `seconds` as a steady_clock duration, to add to now() for a deadline.
inline std::chrono::steady_clock::duration wait_duration(double seconds) {
  // SYNK_TIMEOUT is at most 1e9 s (env.cc); more would overflow the nanoseconds.
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::min(seconds, 1e9)));
}

// `seconds` for a timeout message, as SYNK_TIMEOUT would be written: "30 s", "0.5 s", "1 s".
inline std::string seconds_text(double seconds) {
  std::string t = std::to_string(seconds);
  while (t.size() > 1 && t.back() == '0') t.pop_back();
  if (!t.empty() && t.back() == '.') t.pop_back();
  return t + " s";
}

// The pause of a poll that sleeps, `waited` into its wait: a sixteenth of that, from 50 us to
// 1 ms, so that a long wait costs next to no core time and what it waits for is noticed within
// about 6% (at most 1 ms) of the time it took.
inline std::chrono::microseconds sleep_pause(std::chrono::steady_clock::duration waited) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(waited) / 16;
  return std::clamp(us, std::chrono::microseconds(50), std::chrono::microseconds(1000));
}

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
