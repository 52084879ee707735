// Agreeing across ranks on what went wrong: a failure on some ranks becomes the same error on
// all of them, each naming the same rank and giving its whole text, so that no rank is left
// waiting in a collective the others have left.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <string_view>

namespace synk {

class Communicator;

struct RankFailure {
  int rank = 0;      // the lowest rank that failed
  int node = -1;     // the node that rank gave (Communicator::node() for a Communicator)
  std::string text;  // that rank's text, whole
};

// Collective over comm: the lowest rank for which `failed` holds, with its text and node, on
// every rank; nullopt where no rank failed. One all_reduce when none failed, three broadcasts
// more when one did. On a Communicator they are its own calls, so that its backend finds a rank
// that died (a Remote error) where MPI would wait for it; on an MPI_Comm, plain MPI calls, for
// what runs before a Communicator exists. (An nccl communicator's agreement goes through MPI:
// its calls take device memory only.) Called where comm's own calls are made: on the program's
// threads, or a KeyValue engine's on its own communicator; not inside a non-blocking call's work.
std::optional<RankFailure> first_failure(Communicator& comm, bool failed, std::string_view text);
std::optional<RankFailure> first_failure(MPI_Comm comm, bool failed, std::string_view text,
                                         int node = -1);

// Collective over comm: root's text, whole, on every rank (its length, then its bytes).
std::string text_from(Communicator& comm, int root, std::string_view text);
std::string text_from(MPI_Comm comm, int root, std::string_view text);

}  // namespace synk
