// How a large shm call writes shared memory: with ordinary stores, which leave the lines in
// the writer's cache, or with non-temporal (streaming) ones, which send them to memory.
//
// Which is faster depends on where the reader runs. Sharing a last-level cache with the writer,
// it reads the lines from that cache and ordinary stores win; on another cache (another socket,
// another AMD CCX, or a VM whose vCPUs the host moves between them, as on this machine every few
// seconds) every line crosses the fabric and streaming wins, by up to 3x. So each rank times its
// own calls of at least kMinBytes and keeps, per collective and size class (a power of two), the
// faster of the two, trying the other again now and then. The choice is the rank's alone: how a
// slot was written does not matter to its reader, so the ranks need not agree.
//
// A way is tried for a run of kRun calls in a row, and only the last ones are timed: a writer
// feels its reader's pace two steps late (it waits for the reader to be done with the step before
// last, see step_sync.cc), so a single streaming call looks cheap to the writer while its reader
// pays for it in the next calls. Streaming is kept only when it is kStreamMargin faster, since
// calls of 16-64 KiB time a way to +-50%. Copies out of shared memory into the caller's buffer
// stream when the call's output is at least half the last-level cache: it will not stay cached,
// and streaming spares the read of every destination line. The figures behind each of these:
// docs/measurements.md#the-store-tuners-design.
#pragma once

#include <cstddef>
#include <cstdint>

namespace synk::shm {

enum class StoreMode { tuned, ordinary, streaming };  // SYNK_SHM_STREAM=auto|never|always

// The size of this machine's largest cache (Linux sysfs, cpu0), or 0 if unknown.
std::size_t last_level_cache_bytes();

class StoreTuner {
 public:
  static constexpr std::size_t kMinBytes = std::size_t{16} << 10;
  static constexpr std::uint32_t kRun = 4;   // calls in a row on one way
  static constexpr std::uint32_t kWarm = 2;  // of them not timed: the reader's lag
  // Runs between the runs that try the way not in favour: kExploreEvery at first, doubled each
  // time the try confirms the favoured way, up to kExploreMaxEvery; back to kExploreEvery when
  // the favoured way changes. A class whose calls took kExploreSeconds since its last try
  // (timed calls, scaled to the whole runs) tries again after kExploreEvery runs.
  static constexpr std::uint32_t kExploreEvery = 16;
  static constexpr std::uint32_t kExploreMaxEvery = 256;
  static constexpr double kExploreSeconds = 0.5;
  static constexpr double kStreamMargin = 1.25;  // streaming must be this much faster
  static constexpr int kCollectives = 16;
  static constexpr int kSizeClasses = 48;  // log2 of the bytes: up to 2^47

  // out_bytes_min: outputs of at least this many bytes stream into the caller's buffer
  // (0: half the last-level cache, or 16 MiB where unknown).
  explicit StoreTuner(StoreMode mode = StoreMode::tuned, std::size_t out_bytes_min = 0);

  // Whether calls of `bytes` are tuned (and so timed).
  bool tuned(std::size_t bytes) const { return mode_ == StoreMode::tuned && bytes >= kMinBytes; }
  // At the start of a call of `bytes` (the call's count times the element size) of collective
  // `collective`: whether it streams.
  bool choose(int collective, std::size_t bytes);
  // Whether the call just chosen is timed: it is tuned and past its run's first kWarm calls
  // (the caller reads the clock only then).
  bool timing() const { return current_ != nullptr && timed_; }
  // At its end, after choose(): how long it took.
  void record(double seconds);
  // Whether a call that writes `bytes` into the caller's buffer copies them there streaming.
  bool stream_out(std::size_t bytes) const {
    return mode_ == StoreMode::streaming || (mode_ == StoreMode::tuned && bytes >= out_bytes_min_);
  }

  // What the tuner holds for one class (for tests): each way's seconds per byte (0: not
  // timed yet; record() says how they are kept), ordinary first, and calls seen.
  struct Arms {
    double cost[2] = {0, 0};
    std::uint32_t calls = 0;
    int run_arm = 0;                      // the way of the run under way
    int favoured = 0;                     // the faster way when the run under way began
    bool exploring = false;               // the run under way tries the way not in favour
    std::uint32_t every = kExploreEvery;  // runs from one try of the other way to the next
    std::uint32_t last_try = 0;           // the run of the last try
    double since_try_s = 0;               // seconds of this class's calls since then
    double run_best = 0;  // the fastest timed call of the run under way, seconds per byte
    bool seeded = false;  // began with a neighbouring class's costs instead of a run each way
  };
  const Arms& arms(int collective, std::size_t bytes) const;

 private:
  static int size_class(std::size_t bytes);
  // A new class (row[size_class], row: one collective's classes) starts from the costs of the
  // nearest class of its row (by size) that has timed both ways, if any.
  void seed(Arms* row, int size_class);

  StoreMode mode_;
  std::size_t out_bytes_min_;
  Arms arms_[kCollectives][kSizeClasses];
  Arms* current_ = nullptr;  // the class of the call under way, if tuned
  int arm_ = 0;              // its choice: 1 streams
  bool timed_ = false;       // it is past its run's first kWarm calls
  bool run_ends_ = false;    // it is its run's last call
  std::size_t bytes_ = 0;
};

}  // namespace synk::shm
