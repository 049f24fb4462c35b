#include "heap/block_array.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "base/workers.h"

namespace heapscope {

namespace {

constexpr std::size_t kPage = 4096;

Block* map_blocks(std::size_t capacity) {
  if (capacity == 0) return nullptr;
  void* p = ::mmap(nullptr, capacity * sizeof(Block), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return static_cast<Block*>(p);
}

}  // namespace

BlockArray::BlockArray(std::size_t capacity) : data_(map_blocks(capacity)), capacity_(capacity) {}

BlockArray::BlockArray(std::initializer_list<Block> blocks) : BlockArray(blocks.size()) {
  for (const Block& b : blocks) data_[size_++] = b;
}

BlockArray BlockArray::adopt_mapping(Block* mapped, std::size_t count) {
  BlockArray a;
  a.data_ = count ? mapped : nullptr;  // an empty array owns no pages
  a.size_ = a.capacity_ = count;
  return a;
}

BlockArray::~BlockArray() {
  if (data_) ::munmap(data_, capacity_ * sizeof(Block));
}

BlockArray::BlockArray(BlockArray&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

BlockArray& BlockArray::operator=(BlockArray&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, capacity_ * sizeof(Block));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void BlockArray::push_back(const Block& b) {
  if (size_ == capacity_) {
    const std::size_t grown = capacity_ ? capacity_ * 2 : 1024;
    if (!data_) {
      data_ = map_blocks(grown);
    } else {
      void* p = ::mremap(data_, capacity_ * sizeof(Block), grown * sizeof(Block), MREMAP_MAYMOVE);
      if (p == MAP_FAILED) throw std::bad_alloc();
      data_ = static_cast<Block*>(p);
    }
    capacity_ = grown;
  }
  data_[size_++] = b;
}

namespace {

// Moves `count` blocks from `from` down to `to` (to < from). Most of the time goes to faulting in the
// destination's fresh pages, which scales with cores: the move goes in waves of `from - to` blocks, each
// wave's source and destination apart (its destination is what earlier waves moved away from), and each
// wave is copied in slices on all cores. A short move, or one by a small distance, is one memmove.
void move_down(Block* to, const Block* from, std::size_t count) {
  constexpr std::size_t kParallelBlocks = std::size_t{1} << 16;  // 1 MiB
  const auto distance = static_cast<std::size_t>(from - to);
  if (count < 2 * kParallelBlocks || distance < kParallelBlocks) {
    std::memmove(to, from, count * sizeof(Block));
    return;
  }
  for (std::size_t done = 0; done < count;) {
    const std::size_t wave = std::min(distance, count - done);
    const unsigned n = worker_count(wave, kParallelBlocks);
    run_workers(n, [&](unsigned w) {
      const auto [first, last] = slice_of(wave, n, w);
      std::memcpy(to + done + first, from + done + first, (last - first) * sizeof(Block));
    });
    done += wave;
  }
}

}  // namespace

void BlockArray::compact(const std::vector<Slice>& slices) {
  std::size_t final_size = 0;
  for (const Slice& s : slices) final_size += s.used;
  std::size_t cursor = 0;
  for (const Slice& s : slices) {
    if (s.offset != cursor && s.used) move_down(data_ + cursor, data_ + s.offset, s.used);
    cursor += s.used;
    // Pages a slice moved away from are given back once no later slice moves onto them: those past the
    // end of the compacted array. Below it the next slices land on them, and a page given back would be
    // faulted in (and zeroed) again.
    const std::size_t vacated_from = std::max(cursor, final_size);
    if (s.offset + s.used > vacated_from) {
      const std::size_t from = (reinterpret_cast<std::uintptr_t>(data_ + vacated_from) + kPage - 1) & ~(kPage - 1);
      const std::size_t to = reinterpret_cast<std::uintptr_t>(data_ + s.offset + s.used) & ~(kPage - 1);
      if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
    }
  }
  size_ = cursor;
  release_from(size_);
}

void BlockArray::release_from(std::size_t index) {
  if (!data_) return;
  const auto from = (reinterpret_cast<std::uintptr_t>(data_ + index) + kPage - 1) & ~(kPage - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(data_ + capacity_) & ~(kPage - 1);
  if (end > from) ::madvise(reinterpret_cast<void*>(from), end - from, MADV_DONTNEED);
}

}  // namespace heapscope
