// The shm backend's selection table: for each collective and size class (a power of two of the
// bytes per rank) a Group has run, the algorithm chosen (slots or single copy, measured on the
// host or forced by SYNK_SHM_ALGO, with the slowest rank's times of each way) and how this rank
// writes the slots (ordinary or streaming stores, measured per rank). SYNK_LOG=info prints it
// when the group closes (rank 0's).
#pragma once

#include <string>

#include "backends/shm/algo_chooser.h"
#include "backends/shm/store_tuner.h"

namespace synk::shm {

// One line a row, a header first; empty when no class has been measured or forced.
std::string selection_table(const AlgoChooser& chooser, const StoreTuner& stores, int ranks);

}  // namespace synk::shm
