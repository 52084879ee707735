// The collectives of shm::Group. Each one runs in steps of at most one slot per rank: copy
// in, post (and wait for the ranks this one reads from), then read what they wrote (shm_sync.cc
// says why that is safe). Small calls (up to kEagerBytes per rank for all_reduce, less for the
// others, see below) go in one step through the ranks' entries instead of the slots (up to
// Group::kTinyBytes per rank through the compact copies of their calls, shm_layout.h), so that
// a rank that only writes may run ahead. Large all-reduces are a reduce-scatter (each rank
// reduces its own slice of every slot into the shared result area) followed by an all-gather
// (every rank copies the result out).
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/shm/byte_offset.h"
#include "backends/shm/reduce_kernels.h"
#include "backends/shm/shm_group.h"
#include "synk/error.h"

namespace synk::shm {

namespace {

using detail::Collective;

// On 2 ranks, the largest broadcast and reduce, gather and all_gather (per rank) and
// reduce_scatter (in all) that go through the entries: above these the slots were faster. Launches
// alternated, sorted by host state (one L3 / two), MPI/synk medians: broadcast of 2 KiB 1.52 ->
// 2.05 / 1.54 -> 2.18, reduce 1.49 -> 1.82 / 1.48 -> 1.88 (but of 1 KiB 2.54 -> 2.20 and 2.27
// -> 2.06 through the slots); all_gather of 1 KiB per rank 1.32 -> 1.78 / 1.04 -> 1.70, of 2 KiB
// 1.06 -> 1.48 / 0.97 -> 1.45; reduce_scatter of 1 KiB in all 1.67 -> 2.00 / 1.29 -> 1.65, of
// 2 KiB 1.28 -> 2.04 / 0.87 -> 1.48; gather of 2 KiB per rank 1.58 -> 1.67 / 1.61 -> 1.77, but
// of 1 KiB 2.2 -> 1.8 through the slots. all_reduce keeps kEagerBytes (of 1-2 KiB it was 0-9%
// slower through the slots), and so does every collective on more than 2 ranks: through the
// slots a rank runs only two steps ahead of the slowest one, and every step waited for ranks
// that had to be scheduled first (4 ranks on 2 cores: broadcast of 2 KiB 1.08 us in the
// entries, 4.86 through the slots; reduce 2.03 against 4.02; gather of 2 KiB per rank 1.9-2.1
// against 4.5-4.7; all_gather of 1 KiB per rank 3.0-4.8 against 5.2-5.4).
constexpr std::size_t kRootedEagerBytes = 1024;  // broadcast and reduce
constexpr std::size_t kGatherEagerBytes = 1024;
constexpr std::size_t kAllGatherEagerBytes = 512;
constexpr std::size_t kReduceScatterEagerBytes = 512;
// scatter (in all, on any number of ranks): through the slots every call was a full sync of
// all ranks, 0.3-0.5x MPI's time up to 512 bytes on 2 ranks and 0.05x on 4 ranks on 2 cores
// (3 us against MPI's 0.14), where MPI's root sends and goes on.
constexpr std::size_t kScatterEagerBytes = Group::kEagerBytes;

// An all_gather or gather of more than this many bytes per rank steps in pieces of this size,
// each at the slots' start: the slots then keep 2 MiB of the last-level cache busy on 2 ranks
// instead of 4 (1 MiB pieces, or a walk along the slots). 2 ranks, launches alternated (one L3:
// 65 / two L3s: 24-26 per arm), MPI/synk medians of all_gather of 2, 4, 8 MiB in all: 1.53 ->
// 1.60, 1.46 -> 1.59, 1.23 -> 1.30 / 1.22 -> 1.34, 1.24 -> 1.52, 1.37 -> 1.41; 16-256 MiB
// unchanged; 4 ranks on 2 cores, 4 and 8 MiB: 1.56 -> 1.76, 1.78 -> 1.95. gather of 2, 4, 8
// MiB in all (43-49 / 13-19 launches): 2.10 -> 2.20, 2.12 -> 2.29, 2.07 -> 2.22 / 1.52 -> 1.51,
// 1.53 -> 1.65, 1.80 -> 1.89. Pieces of 256 KiB were slower (all_gather, one L3, 1-16 MiB:
// 1.30-1.36 against 1.25-1.61 in 1 MiB steps).
constexpr std::size_t kGatherPieceBytes = std::size_t{512} << 10;

constexpr std::size_t eager_limit(std::size_t on_two_ranks, int ranks) {
  return ranks <= 2 ? on_two_ranks : Group::kEagerBytes;
}

// Reduces `count` elements of n sources, source(q) for rank q, into dst (in rank order, so
// every rank that reduces the same data gets the same bits).
template <class Source>
void reduce_from(void* dst, int n, Source&& source, std::size_t count, DataType t, ReduceOp op) {
  const void* fixed[256];
  std::vector<const void*> many;
  const void** s = fixed;
  if (n > 256) {
    many.resize(static_cast<std::size_t>(n));
    s = many.data();
  }
  for (int q = 0; q < n; ++q) s[q] = source(q);
  reduce_into(dst, s, n, count, t, op, n);
}

}  // namespace

// Reduces elements [lo, hi) found at src_offset (in elements) of every rank's slot into dst;
// when `own` is given, this rank's elements come from own + lo instead of its slot.
void Group::reduce_slice(std::size_t lo, std::size_t hi, std::size_t src_offset, void* dst,
                         DataType t, ReduceOp op, const void* own) {
  if (hi <= lo) return;
  const std::size_t es = size_of(t);
  auto source = [&](int q) -> const void* {
    if (q == cfg_.rank && own) return cat(own, lo * es);
    const unsigned char* offered = peer_region(q);  // a node buffer, read in place
    return (offered ? offered : slot(q)) + (src_offset + lo) * es;
  };
  reduce_from(dst, cfg_.size, source, hi - lo, t, op);
}

void Group::all_reduce(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op) {
  begin(Collective::all_reduce, count, t, op, 0);
  const std::size_t bytes = count * size_of(t);
  if (bytes <= kEagerBytes) {  // in the entries: the data shares a line with the step
    next_step(true, bytes);
    copy(eager_out(), send, bytes);
    sync();
    reduce_from(recv, cfg_.size, [&](int q) { return eager_in(q); }, count, t, op);
  } else if (bytes <= std::min(cfg_.small_bytes, cfg_.slot_bytes)) {
    all_reduce_small(send, recv, count, t, op);
  } else {
    reduce_large(send, recv, count, t, op, -1);
  }
  end();
}

// One step: everyone copies in, then everyone reduces the whole vector from all slots.
void Group::all_reduce_small(const void* send, void* recv, std::size_t count, DataType t,
                             ReduceOp op) {
  next_slot_step(count * size_of(t));
  shift_slots(send);
  copy(slot(cfg_.rank), send, count * size_of(t));
  sync();
  reduce_slice(0, count, 0, recv, t, op);
}

void Group::reduce_large(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op,
                         int root) {
  const std::size_t es = size_of(t);
  const std::size_t chunk = slot_elems(t);
  const bool receives = root < 0 || root == cfg_.rank;
  std::size_t off = 0;
  do {
    const std::size_t n = std::min(chunk, count - off);
    next_slot_step(n * es);
    shift_slots(cat(send, off * es), receives ? at(recv, off * es) : nullptr);
    // The others read only their slices of my slot; my own slice I reduce from send directly.
    std::size_t lo, hi;
    slice(cfg_.rank, n, es, &lo, &hi);
    // From a node buffer the others read their slices in place (unless this rank streams its
    // copies: offer() says why); they are done with them when they post, so the call's last
    // arrive() is its closing wait.
    if (!offer(cat(send, off * es), n * es)) {
      copy_in(slot(cfg_.rank), cat(send, off * es), lo * es);
      copy_in(slot(cfg_.rank) + hi * es, cat(send, (off + hi) * es), (n - hi) * es);
    }
    sync();
    place_result(root < 0 ? 0 : root);
    // The root of a reduce (out of place) reduces its slice straight into recv: only the
    // others' slices go through the result area and get copied out.
    const bool direct = root == cfg_.rank && send != recv;
    // Where the slots are written with streaming stores (the ranks do not share an L3), so is
    // the result area: each piece is reduced into an L1 scratch and streamed from there, and
    // copied to recv. Ordinary stores into the result area first took every line back from
    // the cache of the rank that read it the last time this set was used. 2 ranks on two
    // L3s, all_reduce of 16 MiB: reducing 512 KiB took 200 us, against 40 on one L3.
    const bool scratch = stream_ && !direct;
    // Otherwise, where recv is written with ordinary stores, my own slice of the result goes
    // to recv piece by piece, each copied while it is still in L1 from the reduction, instead
    // of after the whole slice, out of L2 or further. 2 ranks, all_reduce of 1 MiB: 93-108 us
    // -> 67-84 (1.5-1.6x MPI -> 1.9-2.4x); of 4 MiB: 1.4-1.6x -> 1.7-2.0x; no change measured
    // from 8 MiB up. Streaming stores read nothing back: there the whole slice is reduced
    // first and its copy goes out after the post, while the others arrive.
    const bool fused = receives && !direct && !stream_out_;
    unsigned char* dst = direct ? at(recv, off * es) : result();  // element 0 of this chunk
    const std::size_t piece =
        scratch || fused ? std::max<std::size_t>(1, kFusedPieceBytes / es) : hi - lo;
    for (std::size_t a = lo; a < hi; a += piece) {
      const std::size_t b = std::min(hi, a + piece);
      if (scratch) {
        reduce_slice(a, b, 0, scratch_.data(), t, op, cat(send, off * es));
        copy_in(result() + a * es, scratch_.data(), (b - a) * es);
        if (receives) copy_out(at(recv, (off + a) * es), scratch_.data(), (b - a) * es);
        continue;
      }
      reduce_slice(a, b, 0, dst + a * es, t, op, cat(send, off * es));
      if (fused) copy_out(at(recv, (off + a) * es), result() + a * es, (b - a) * es);
    }
    post();
    if (receives && !direct && !fused && !scratch)
      copy_out(at(recv, (off + lo) * es), result() + lo * es, (hi - lo) * es);
    arrive();
    if (receives) {
      copy_out(at(recv, off * es), result(), lo * es);
      copy_out(at(recv, (off + hi) * es), result() + hi * es, (n - hi) * es);
    }
    off += n;
  } while (off < count);
}

// Only the root reads: step by step the others write a chunk and go on (their check is
// lagged), up to two steps ahead; the root reduces every chunk straight into recv. Its own
// part comes from send, except in place on a root other than rank 0 (the reduction, in rank
// order, may alias only its first source): then it goes through its slot too. Against
// reduce_large, where every rank reduces a slice and the root then copies the others' slices
// out, this moves less between the caches and waits once per step instead of twice. The
// root's time against reduce_large's (synk-bench reduce, one run each): 2 ranks, 0.5-0.9x at
// 64 KiB-16 MiB, equal from 64 MiB; 4 ranks (the root reads 4 slots alone), 0.3-1.0x up to
// 16 MiB but 1.17x at 64-256 MiB.
void Group::reduce_at_root(const void* send, void* recv, std::size_t count, DataType t,
                           ReduceOp op, int root) {
  const std::size_t es = size_of(t);
  const std::size_t chunk = slot_elems(t);
  const bool own_via_slot = send == recv && root != 0;
  std::size_t off = 0;
  do {
    const std::size_t n = std::min(chunk, count - off);
    next_slot_step(n * es);
    if (cfg_.rank != root || own_via_slot) copy_in(slot(cfg_.rank), cat(send, off * es), n * es);
    if (cfg_.rank != root) {
      post();
    } else {
      sync();
      auto source = [&](int q) -> const void* {
        return q == root && !own_via_slot ? cat(send, off * es) : slot(q);
      };
      reduce_from(at(recv, off * es), cfg_.size, source, n, t, op);
    }
    off += n;
  } while (off < count);
}

void Group::reduce(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op,
                   int root) {
  begin(Collective::reduce, count, t, op, root);
  const std::size_t bytes = count * size_of(t);
  if (bytes <= eager_limit(kRootedEagerBytes, cfg_.size)) {
    // In the entries: the non-roots write theirs and go on; the root reads them all (its own
    // too, so that an in-place recv aliases no source).
    next_step(true, bytes);
    copy(eager_out(), send, bytes);
    if (cfg_.rank == root) {
      sync();
      reduce_from(recv, cfg_.size, [&](int q) { return eager_in(q); }, count, t, op);
    } else {
      post();
    }
  } else if (cfg_.size <= 2 || bytes <= cfg_.root_reduces_bytes) {
    reduce_at_root(send, recv, count, t, op, root);
  } else {
    reduce_large(send, recv, count, t, op, root);
  }
  end();
}

void Group::broadcast(void* buf, std::size_t count, DataType t, int root) {
  begin(Collective::broadcast, count, t, ReduceOp::sum, root);
  const std::size_t es = size_of(t);
  if (count * es <= eager_limit(kRootedEagerBytes, cfg_.size)) {  // the root does not wait
    next_step(true, count * es);
    if (cfg_.rank == root) {
      copy(eager_out(), buf, count * es);
      post();
    } else {
      sync_with(root);
      copy(buf, eager_in(root), count * es);
    }
    return end();
  }
  if (cma_chosen(Collective::broadcast, count * es)) {
    broadcast_cma(buf, count, t, root);
    return end();
  }
  const std::size_t chunk = slot_elems(t);
  std::size_t off = 0;
  do {
    const std::size_t n = std::min(chunk, count - off);
    next_slot_step(n * es);
    shift_slots(cfg_.rank == root ? at(buf, off * es) : nullptr);
    // The root copies even from a node buffer: read in place, its buffer would have to stay
    // as it is until every reader is done, so the root would wait for them instead of going
    // on. With new data before every call (synk-bench -F 1), as a root has when it
    // broadcasts what it just computed, that made broadcast of 64 KiB-1 MiB 1.3-1.7x MPI
    // instead of 3.6-7.6x, and of 4-16 MiB 1.4-2.4x against 1.7-7.7x (2 ranks, 1-3 launches
    // of each per host state; with the same data every call it was 3.5-4.4x against 1.7-3.0x).
    if (cfg_.rank == root) {
      copy_in(slot(root), at(buf, off * es), n * es);
      post();  // the root does not wait: the next step (or call) waits for the readers
    } else {
      sync_with(root);
      copy_out(at(buf, off * es), slot(root), n * es);
    }
    off += n;
  } while (off < count);
  end();
}

// all_gather (root -1) and gather: every rank that others read from copies a chunk into its
// slot and posts; a receiver copies its own block from send to recv (in all_gather in the
// same pass as its slot, in a gather while the others arrive), then every other rank's block
// out of their slots. (The root of a gather copies nothing in: it does the copying-out alone,
// so every byte it need not move counts.)
void Group::gather_common(const void* send, void* recv, std::size_t count, DataType t, int root) {
  const std::size_t es = size_of(t);
  const bool pieces = count * es > kGatherPieceBytes;
  const std::size_t chunk =
      pieces ? std::min(slot_elems(t), kGatherPieceBytes / es) : slot_elems(t);
  const bool receives = root < 0 || root == cfg_.rank;
  if (count * es <= eager_limit(root < 0 ? kAllGatherEagerBytes : kGatherEagerBytes, cfg_.size)) {
    // In the entries; in a gather only the root waits.
    next_step(true, count * es);
    copy(eager_out(), send, count * es);
    if (!receives) return post();
    sync();
    for (int q = 0; q < cfg_.size; ++q) {
      copy(at(recv, static_cast<std::size_t>(q) * count * es), eager_in(q), count * es);
    }
    return;
  }
  if (cma_chosen(root < 0 ? Collective::all_gather : Collective::gather, count * es)) {
    return gather_cma(send, recv, count, t, root);
  }
  bool read_in_place = false;  // some rank's block came straight from its node buffer
  std::size_t off = 0;
  do {
    const std::size_t n = std::min(chunk, count - off);
    next_slot_step(n * es, /*walk=*/!pieces);
    const int me = cfg_.rank;
    shift_slots(me == root ? nullptr : cat(send, off * es));  // a gather's root writes none
    unsigned char* own = receives ? at(recv, (static_cast<std::size_t>(me) * count + off) * es)
                                  : nullptr;
    if (root < 0) {
      // all_gather: my slot and my own block are written in one pass over send, which is
      // then read once. 2 ranks, all_gather of 128 KiB-8 MiB on one L3: 1.06-1.68x MPI ->
      // 1.25-1.83x (1 MiB 1.47 -> 1.62); on two L3s (slots streamed, and since streamed
      // pieces no longer fence one by one) 256 KiB-4 MiB 1.00-1.04x -> 1.14-1.27x.
      if (offer(cat(send, off * es), n * es)) {
        read_in_place = true;
        copy_out(own, cat(send, off * es), n * es);
      } else {
        copy_in_and_out(slot(me), own, cat(send, off * es), n * es);
      }
      post();
    } else {
      if (root != me) copy_in(slot(me), cat(send, off * es), n * es);
      post();
      // The root's own block goes straight from send (still in cache) while the others
      // arrive. Measured when all_gather still took this path, where a rank's own slot may
      // have been written past the cache: 64 KiB-1 MiB per rank 18-25% faster than copying
      // it out of the slot after the wait, 4-16 MiB 3-15%.
      if (receives) copy_out(own, cat(send, off * es), n * es);
    }
    arrive();
    if (receives) {
      for (int q = 0; q < cfg_.size; ++q) {
        if (q == me) continue;
        const unsigned char* offered = peer_region(q);  // only all_gather offers
        read_in_place = read_in_place || offered;
        copy_out(at(recv, (static_cast<std::size_t>(q) * count + off) * es),
                 offered ? offered : slot(q), n * es);
      }
    }
    off += n;
  } while (off < count);
  // Every rank saw the same offers, so all take this last step or none: after it every reader
  // is done with the node buffers read in place.
  if (read_in_place) sync();
}

void Group::all_gather(const void* send, void* recv, std::size_t count, DataType t) {
  begin(Collective::all_gather, count, t, ReduceOp::sum, 0);
  gather_common(send, recv, count, t, -1);
  end();
}

void Group::gather(const void* send, void* recv, std::size_t count, DataType t, int root) {
  begin(Collective::gather, count, t, ReduceOp::sum, root);
  gather_common(send, recv, count, t, root);
  end();
}

// The first sync shares every rank's count (in the call descriptors); the root checks them
// against recv_counts and a second sync tells everyone its verdict.
void Group::gatherv(const void* send, std::size_t count, void* recv,
                    std::span<const std::size_t> recv_counts, DataType t, int root) {
  begin(Collective::gatherv, count, t, ReduceOp::sum, root);
  next_step();
  sync();
  std::vector<std::size_t> counts(static_cast<std::size_t>(cfg_.size));
  std::size_t max_count = 0;
  for (int q = 0; q < cfg_.size; ++q) {
    counts[static_cast<std::size_t>(q)] = peer_call_count(q);
    max_count = std::max(max_count, counts[static_cast<std::size_t>(q)]);
  }
  int bad = -1;
  if (cfg_.rank == root) {
    for (int q = 0; q < cfg_.size && bad < 0; ++q) {
      if (recv_counts[static_cast<std::size_t>(q)] != counts[static_cast<std::size_t>(q)]) bad = q;
    }
    set_status(bad);
  }
  sync();
  bad = static_cast<int>(status_of(root));
  if (bad >= 0) {
    throw Error(ErrorCode::InvalidUsage,
                "gatherv: rank " + std::to_string(bad) + " sends " +
                    std::to_string(counts[static_cast<std::size_t>(bad)]) +
                    " elements but the root's recv_counts[" + std::to_string(bad) +
                    "] says otherwise");
  }
  const std::size_t es = size_of(t);
  const std::size_t chunk = slot_elems(t);
  for (std::size_t off = 0; off < max_count; off += chunk) {
    next_slot_step(std::min(chunk, max_count - off) * es);
    const std::size_t mine = count > off ? std::min(chunk, count - off) : 0;
    copy_in(slot(cfg_.rank), cat(send, std::min(off, count) * es), mine * es);
    sync();
    if (cfg_.rank != root) continue;
    std::size_t displ = 0;
    for (int q = 0; q < cfg_.size; ++q) {
      const std::size_t c = counts[static_cast<std::size_t>(q)];
      if (c > off) copy_out(at(recv, (displ + off) * es), slot(q), std::min(chunk, c - off) * es);
      displ += c;
    }
  }
  end();
}

void Group::scatter(const void* send, void* recv, std::size_t count, DataType t, int root) {
  begin(Collective::scatter, count, t, ReduceOp::sum, root);
  const std::size_t es = size_of(t);
  const std::size_t block = count * es;
  if (block * static_cast<std::size_t>(cfg_.size) <= kScatterEagerBytes) {
    // In the root's entry: it writes every block and goes on (as broadcast's root does); each
    // other rank waits for the root alone and takes its block.
    next_step(true, block * static_cast<std::size_t>(cfg_.size));
    if (cfg_.rank == root) {
      copy(eager_out(), send, block * static_cast<std::size_t>(cfg_.size));
      post();
      copy(recv, cat(send, static_cast<std::size_t>(root) * block), block);
    } else {
      sync_with(root);
      copy(recv, eager_in(root) + static_cast<std::size_t>(cfg_.rank) * block, block);
    }
    return end();
  }
  if (use_cma(block)) {
    scatter_cma(send, recv, count, t, root);
    return end();
  }
  const std::size_t chunk = slot_elems(t);
  std::size_t off = 0;
  do {
    const std::size_t n = std::min(chunk, count - off);
    next_slot_step(n * es);
    if (cfg_.rank == root) {
      for (int q = 0; q < cfg_.size; ++q) {
        if (q != root)
          copy_in(slot(q), cat(send, (static_cast<std::size_t>(q) * count + off) * es), n * es);
      }
    }
    sync();
    unsigned char* dst = at(recv, off * es);
    // The root's own block goes straight to recv (nothing moves in place, where they are one).
    const void* src = cfg_.rank == root
                          ? cat(send, (static_cast<std::size_t>(root) * count + off) * es)
                          : slot(cfg_.rank);
    copy_out(dst, src, n * es);
    off += n;
  } while (off < count);
  end();
}

// Each step carries chunk j of all size() blocks from every rank; rank r reduces block r of
// every slot straight into its recv, its own block r from send (not copied in: nobody else
// reads it) unless recv is that very block (in place), which the reduction may not alias.
void Group::reduce_scatter(const void* send, void* recv, std::size_t count, DataType t,
                           ReduceOp op) {
  begin(Collective::reduce_scatter, count, t, op, 0);
  const std::size_t es = size_of(t);
  const std::size_t n_ranks = static_cast<std::size_t>(cfg_.size);
  // All of send in the entries, one step.
  if (n_ranks * count * es <= eager_limit(kReduceScatterEagerBytes, cfg_.size)) {
    next_step(true, n_ranks * count * es);
    copy(eager_out(), send, n_ranks * count * es);
    sync();
    const std::size_t mine = static_cast<std::size_t>(cfg_.rank) * count * es;
    reduce_from(recv, cfg_.size, [&](int q) { return eager_in(q) + mine; }, count, t, op);
    return end();
  }
  const std::size_t chunk = std::max<std::size_t>(1, slot_elems(t) / n_ranks);
  std::size_t off = 0;
  do {
    const std::size_t n = std::min(chunk, count - off);
    next_slot_step(n_ranks * n * es);
    unsigned char* mine = slot(cfg_.rank);
    const std::size_t me = static_cast<std::size_t>(cfg_.rank);
    const unsigned char* own = cat(send, (me * count + off) * es);
    const bool own_from_send = own != at(recv, off * es);
    for (std::size_t b = 0; b < n_ranks; ++b) {
      if (b != me || !own_from_send)
        copy_in(mine + b * n * es, cat(send, (b * count + off) * es), n * es);
    }
    sync();
    reduce_slice(0, n, me * n, at(recv, off * es), t, op, own_from_send ? own : nullptr);
    off += n;
  } while (off < count);
  end();
}

void Group::barrier() {
  begin(Collective::barrier, 0, DataType::uint8, ReduceOp::sum, 0);
  next_step();
  sync();
  end();
}

}  // namespace synk::shm
