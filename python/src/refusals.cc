// See refusals.h.
#include "refusals.h"

#include "no_gil.h"
#include "synk/agreement.h"

namespace synk::python {

void fail_as_agreed(Communicator& c, const std::string& op, int first,
                    const std::optional<Error>& mine) {
  const std::string text =
      without_gil([&] { return text_from(c, first, mine ? mine->message() : std::string()); });
  if (mine) throw *mine;
  throw Error(ErrorCode::Remote,
              op + ": rank " + std::to_string(first) + " rejected its arguments: " + text);
}

void refuse_where_any_failed(Communicator& c, const std::string& op,
                             const std::optional<Error>& mine) {
  std::int32_t first = mine ? c.rank() : c.size();
  without_gil([&] { c.all_reduce(&first, &first, 1, DataType::int32, ReduceOp::min); });
  if (first < c.size()) fail_as_agreed(c, op, first, mine);
}

}  // namespace synk::python
