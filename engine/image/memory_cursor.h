// MemoryCursor: fast word reads for scans that move through memory in order (a chunk walk, a pointer
// scan). It keeps a zero-copy view of the region it is in, so most reads are a bounds check and a load
// instead of a virtual Image::read call; it falls back to read() where the image has no contiguous view.
#pragma once

#include <cstring>
#include <optional>
#include <span>

#include "image/image.h"

namespace heapscope {

class MemoryCursor {
 public:
  explicit MemoryCursor(const Image& image) : image_(image) {}

  WordRead u64(Address addr) {
    if (!(addr >= base_ && addr + 8 <= base_ + bytes_.size())) refill(addr);
    if (addr >= base_ && addr + 8 <= base_ + bytes_.size()) {
      std::uint64_t v;
      std::memcpy(&v, bytes_.data() + (addr - base_), 8);
      return v;
    }
    return image_.read_u64(addr);
  }

  // The `len` bytes at `addr` where they lie in one region the image holds whole (an mmapped core's);
  // empty otherwise. The region stays cached: a scan of neighbouring blocks asks the image once.
  std::span<const std::byte> span(Address addr, std::size_t len) {
    if (!(addr >= base_ && addr + len <= base_ + bytes_.size())) refill(addr);
    if (addr >= base_ && addr + len <= base_ + bytes_.size()) return bytes_.subspan(addr - base_, len);
    return {};
  }

  // A hint that `addr` is read soon: its cache line is fetched meanwhile when it lies in the region at
  // hand (nothing is looked up for it otherwise).
  void prefetch(Address addr) const {
    if (addr >= base_ && addr < base_ + bytes_.size()) __builtin_prefetch(bytes_.data() + (addr - base_));
  }

  const Image& image() const { return image_; }

 private:
  void refill(Address addr) {
    base_ = 0;
    bytes_ = {};
    const MemoryRegion* r = image_.region_at(addr);
    if (!r || !r->bytes_present) return;
    auto v = image_.view(r->start, r->size());
    if (v.size() == r->size()) {
      base_ = r->start;
      bytes_ = v;
    }
  }

  const Image& image_;
  Address base_ = 0;
  std::span<const std::byte> bytes_;
};

}  // namespace heapscope
