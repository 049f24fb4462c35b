// BlockArray: the heap's blocks in one array that can be filled in parallel, slice by slice, without a
// copy. Its memory is reserved with mmap and only touched pages count as resident, so each walker can be
// given a slice sized for the worst case (every chunk the minimum size) at no cost; compact() then closes
// the gaps and returns the pages left over to the system.
#pragma once

#include <cstddef>
#include <vector>

#include "heap/block.h"

namespace heapscope {

class BlockArray {
 public:
  BlockArray() = default;
  explicit BlockArray(std::size_t capacity);
  BlockArray(std::initializer_list<Block> blocks);
  // Takes over `count` blocks at `mapped`, the page-aligned start of a writable mmap'ed range of at least
  // that many blocks (a private mapping of a saved index: loading it copies nothing); unmapped as its own.
  static BlockArray adopt_mapping(Block* mapped, std::size_t count);
  ~BlockArray();
  BlockArray(BlockArray&& other) noexcept;
  BlockArray& operator=(BlockArray&& other) noexcept;
  BlockArray(const BlockArray&) = delete;
  BlockArray& operator=(const BlockArray&) = delete;

  Block* data() { return data_; }
  const Block* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  const Block& operator[](std::size_t i) const { return data_[i]; }
  Block& operator[](std::size_t i) { return data_[i]; }
  const Block* begin() const { return data_; }
  const Block* end() const { return data_ + size_; }
  Block* begin() { return data_; }
  Block* end() { return data_ + size_; }

  void push_back(const Block& b);  // grows by remapping when full

  // Slices [offset, offset + used) of the capacity, in increasing offset order, become the contents,
  // moved together; pages no longer needed are released.
  struct Slice {
    std::size_t offset = 0;
    std::size_t used = 0;
  };
  void compact(const std::vector<Slice>& slices);

 private:
  void release_from(std::size_t index);  // gives back whole pages from element `index` on

  Block* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace heapscope
