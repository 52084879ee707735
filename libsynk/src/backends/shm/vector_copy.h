// memcpy for the shm collectives' ordinary (cached) copies into and out of the slots, of 2 KiB
// and more: a 256-bit vector loop instead of glibc's `rep movsb`.
//
// Why. glibc 2.36 copies 2 KiB up to about the L2 size with `rep movsb` on CPUs with fast
// short rep mov (FSRM), this machine's AMD EPYC (Zen 4) among them. Reading lines another core
// had just written, that copy ran at a third of its speed for seconds at a time, while a vector
// loop kept its pace (docs/measurements.md#memcpy-and-the-vector-copy). From 1 MiB glibc uses its
// loop anyway, and below 2 KiB it never uses rep movsb: those stay with memcpy.
#pragma once

#include <cstddef>

namespace synk::shm {

// Below this, glibc's memcpy never uses rep movsb, and vector_copy is memcpy.
constexpr std::size_t kVectorCopyMinBytes = 2048;

// Like memcpy (no overlap); from kVectorCopyMinBytes with AVX2 where the CPU has it.
void vector_copy(void* dst, const void* src, std::size_t bytes);

}  // namespace synk::shm
