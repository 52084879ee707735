// shm::Group: its parts laid out in the segment, and the frame of a call (begin, end), where
// the store tuner and the algorithm trials time it. Which algorithm a call runs is in
// shm_collectives.cc.
#include "backends/shm/shm_group.h"

#include <sys/mman.h>

#include <string>
#include <utility>

#include "backends/shm/selection_table.h"
#include "backends/shm/stream_copy.h"
#include "core/logging.h"

namespace synk::shm {

namespace {

unsigned char* control_blocks(void* base) {
  return static_cast<unsigned char*>(base) + layout::kHeaderBytes;
}

unsigned char* arena_data(void* base, int size) {
  return control_blocks(base) + StepChannel::control_bytes(size);
}

// Reads one byte of every page: this process's first access to each page then happens here.
void visit_pages(const unsigned char* base, std::size_t bytes) {
  for (std::size_t o = 0; o < bytes; o += 4096) {
    const volatile unsigned char* p = base + o;
    (void)*p;
  }
}

}  // namespace

std::size_t Group::segment_bytes(int size, std::size_t slot_bytes) {
  return layout::kHeaderBytes + StepChannel::control_bytes(size) +
         SlotArena::arena_bytes(size, slot_bytes);
}

Group::Group(void* base, const GroupConfig& config)
    : cfg_(config),
      steps_(control_blocks(base), config),
      slots_(arena_data(base, config.size), steps_, config.slot_bytes),
      node_(steps_, slots_),
      cma_(steps_, config.cma_min_bytes),
      store_tuner_(config.store_mode),
      algo_chooser_(config.forced_algos) {
  // Map every control block and slot now, writable: otherwise the first pass through the
  // entries takes a page fault per page and rank, which shows in the first small calls, and so
  // does the first walk of the slots (docs/measurements.md#pages-mapped-when-the-group-is-made). Best effort: before Linux
  // 5.14 the faults simply come later.
  madvise(control_blocks(base), segment_bytes(cfg_.size, cfg_.slot_bytes) - layout::kHeaderBytes,
          MADV_POPULATE_WRITE);
  // On some VMs (this one) each process's first access to each page stays slow after that, about
  // 6 us a page: the first walk of each new size through the slots paid it, 10-30x slower than
  // after (docs/measurements.md#first-access-to-each-page-of-the-slots). Paid here, once.
  visit_pages(arena_data(base, cfg_.size), SlotArena::arena_bytes(cfg_.size, cfg_.slot_bytes));
}

Group::~Group() {
  if (cfg_.rank != 0) return;
  SYNK_LOG_AT(info, [&] {
    const std::string table = selection_table();
    return table.empty() ? std::string("shm: no size class was measured or forced")
                         : "shm: the algorithms chosen (slots/cma: the slowest rank's best time a "
                           "call in the last trial; stores: rank 0's)\n" + table;
  }());
}

std::string Group::selection_table() const {
  return shm::selection_table(algo_chooser_, store_tuner_, cfg_.size);
}

int Group::add_region(unsigned char* base, std::size_t stride, std::size_t bytes,
                      std::shared_ptr<void> keep) {
  return node_.add_region(base, stride, bytes, std::move(keep));
}

void Group::begin(const detail::CollArgs& a) {
  const detail::Collective c = a.coll;
  steps_.begin_call(c, a.count, a.dtype, a.op, a.root, a.name);
  algo_chosen_ = false;  // a call that threw before its end() leaves nothing to time
  const std::size_t bytes = a.count * size_of(a.dtype);
  // What this rank writes into its buffer: size() blocks for these, one for the others.
  const bool gathers = c == detail::Collective::all_gather || c == detail::Collective::gather ||
                       c == detail::Collective::all_to_all;  // all_to_allv: a rank's total
  slots_.set_stores(
      store_tuner_.choose(static_cast<int>(c), bytes),
      store_tuner_.stream_out(gathers ? bytes * static_cast<std::size_t>(cfg_.size) : bytes));
  if (store_tuner_.timing()) call_start_ = std::chrono::steady_clock::now();
}

void Group::end() {
  // The caller may hand recv to another thread next: what was streamed into it is visible first.
  if (slots_.streams_in() || slots_.streams_out()) stream_fence();
  if (store_tuner_.timing()) {
    store_tuner_.record(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - call_start_).count());
  }
  if (algo_chosen_) time_algo_trial();
  steps_.end_call();
}

void Group::reject(detail::Collective c, ErrorCode code, const std::string& message,
                   const char* name) {
  slots_.set_stores(false, false);  // the rejecting step streams nothing
  steps_.reject(c, code, message, name);
}

void Group::reject(const detail::CollArgs& a, ErrorCode code, const std::string& message) {
  // The others' cma_chosen, but for the probe: theirs meets this rejection in its first step,
  // and they leave the call knowing no more than this rank.
  if (const std::size_t bytes = chosen_bytes(a); bytes > 0 && cma_.may_be_on()) {
    algo_chooser_.choose(a.coll, bytes);
  }
  reject(a.coll, code, message, a.name);
}

}  // namespace synk::shm
