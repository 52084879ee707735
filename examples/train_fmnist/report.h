// What rank 0 shows: a progress bar within the epoch (terminals only), one line per epoch,
// and the per-epoch records as JSON.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "trainer.h"

namespace fmnist {

// True when rank 0's output reaches a terminal. Under mpirun a rank's stdout is Open MPI's
// relay pty, a terminal whatever the user's stdout is, so there the answer is that of the
// outermost launcher process (synkrun, mpirun, ...) above this one.
bool stdout_is_terminal();

class Report {
 public:
  // json_path empty: no JSON. The file is rewritten after every epoch, so a run cut short
  // still leaves the epochs it finished. Throws std::runtime_error when it cannot be written.
  Report(std::string json_path, bool progress_bar);

  void progress(int epoch, std::size_t step, std::size_t steps);
  // Erases the progress bar, if one is drawn (before an epoch's line or an error).
  void clear_progress();
  void epoch(const EpochRecord& rec);
  const std::vector<EpochRecord>& records() const { return records_; }

 private:
  void write_json() const;

  std::string json_path_;
  bool bar_;
  int last_width_ = -1;
  std::vector<EpochRecord> records_;
};

}  // namespace fmnist
