// memcpy for the shm collectives' ordinary (cached) copies into and out of the slots, of 2 KiB
// and more: a 256-bit vector loop instead of glibc's `rep movsb`.
//
// Why. glibc 2.36 copies 2 KiB up to about the L2 size with `rep movsb` on CPUs with fast
// short rep mov (FSRM), this machine's AMD EPYC (Zen 4) among them. Reading lines another core
// had just written, that copy ran at a third of its speed for seconds at a time, while a vector
// loop kept its pace: two processes passing 64 KiB through a shared buffer (one copying in, the
// other out, on one L3) took 5.1-6.8 us a step with memcpy in most launches and 1.8-3.9 in the
// rest, 1.8-2.6 us with this loop; at 256 KiB 8-23 us against 7.6-9.6. GLIBC_TUNABLES=
// glibc.cpu.x86_rep_movsb_threshold raised past the size made glibc's own loop as fast. In the
// collectives (synk-bench -b 4K -e 4M -f 4 --backend shm, 2 ranks, launches alternated with
// memcpy; medians of MPI/synk, 43-52 launches per arm on one L3, 26-35 on two): at 64 KiB
// broadcast 1.67 -> 2.30x and 1.45 -> 1.79x, scatter 1.79 -> 2.40x and 1.78 -> 2.21x, all_gather
// 1.26 -> 1.54x and 1.29 -> 1.50x (gather 1.92 -> 2.43x on one L3 in an earlier run); at 256 KiB
// broadcast and scatter 7-18% faster; no row (of those and reduce) more than 4% slower.
// Copying in with memcpy and out with the loop measured no better. From 1 MiB glibc uses its
// loop anyway, and below 2 KiB it never uses rep movsb: those stay with memcpy.
#pragma once

#include <cstddef>

namespace synk::shm {

// Below this, glibc's memcpy never uses rep movsb, and vector_copy is memcpy.
constexpr std::size_t kVectorCopyMinBytes = 2048;

// Like memcpy (no overlap); from kVectorCopyMinBytes with AVX2 where the CPU has it.
void vector_copy(void* dst, const void* src, std::size_t bytes);

}  // namespace synk::shm
