// How messages name a rank of a communicator whose ranks are not the job's: "3 (job rank 5)".
#pragma once

#include <string>

namespace synk::detail {

// "" where `job` is `rank` or unknown (negative: MPI_UNDEFINED, a rank outside MPI_COMM_WORLD),
// else "job rank 5", for the parentheses after the communicator's rank.
inline std::string job_rank_words(int rank, int job) {
  return job >= 0 && job != rank ? "job rank " + std::to_string(job) : std::string();
}

// "3", or "3 (job rank 5)".
inline std::string rank_with_job_rank(int rank, int job) {
  const std::string words = job_rank_words(rank, job);
  return std::to_string(rank) + (words.empty() ? "" : " (" + words + ")");
}

}  // namespace synk::detail
