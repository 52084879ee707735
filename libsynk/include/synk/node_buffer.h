// synk::NodeBuffer: memory from Communicator::alloc that the other ranks of the node can read
// in place, so collectives on it skip the copy through synk's shared staging slots.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <utility>

namespace synk {

// A buffer of one rank, made by the collective Communicator::alloc. On the shm backend it is this
// rank's part of one shared-memory segment that every rank of the node has mapped (the idea of
// NCCL's user buffer registration and of MPI_Win_allocate_shared): an all_gather or a large
// all_reduce (or reduce, on 3+ ranks) whose send buffer lies in it lets the other ranks read it
// where it is, instead of this rank first copying it into synk's slots (docs/shm-backend.md:
// when it still copies). Such a call returns only once every rank has finished reading it, so
// the buffer may be changed as soon as it returns. On the other backends it is ordinary
// page-aligned memory.
//
// The memory stays valid while this object (any copy of it) lives, also past its Communicator.
// On shm a dropped buffer stays mapped until the communicator's next alloc after every rank has
// dropped it (a peer still holding its part may offer it, read through this rank's mapping), so
// allocating per step works; a buffer made once costs less.
class NodeBuffer {
 public:
  NodeBuffer() = default;
  NodeBuffer(void* data, std::size_t size, std::shared_ptr<void> keep)
      : data_(data), size_(size), keep_(std::move(keep)) {}

  void* data() const { return data_; }
  std::size_t size() const { return size_; }  // bytes
  bool empty() const { return size_ == 0; }
  // The buffer as elements of T (size() / sizeof(T) of them).
  template <class T>
  std::span<T> as() const {
    return {static_cast<T*>(data_), size_ / sizeof(T)};
  }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
  std::shared_ptr<void> keep_;  // the mapping (or the private allocation)
};

}  // namespace synk
