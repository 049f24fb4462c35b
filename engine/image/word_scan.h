// Visiting every aligned 64-bit word of an address range, zero-copy where the image allows. The pointer
// scan of the graph and the type inference both walk memory this way.
#pragma once

#include <algorithm>
#include <cstring>

#include "image/image.h"
#include "image/memory_cursor.h"

namespace heapscope {

namespace word_scan_detail {

// The range [start, start + len) rounded in to whole aligned words: its start, and its length in bytes.
inline std::pair<Address, std::size_t> aligned_words(Address start, Address end) {
  start = (start + 7) & ~Address{7};
  return {start, start >= end ? 0 : static_cast<std::size_t>(end - start) & ~std::size_t{7}};
}

template <typename Fn>
void each_word(std::span<const std::byte> bytes, Address start, Fn& fn) {
  for (std::size_t off = 0; off < bytes.size(); off += 8) {
    std::uint64_t w;
    std::memcpy(&w, bytes.data() + off, 8);
    fn(start + off, w);
  }
}

}  // namespace word_scan_detail

// Calls fn(address_of_word, value) for each 8-byte-aligned word in [start, end) that the image has.
template <typename Fn>
void for_each_word(const Image& image, Address start, Address end, Fn&& fn) {
  const auto [first, len] = word_scan_detail::aligned_words(start, end);
  if (len == 0) return;
  if (const std::span<const std::byte> bytes = image.view(first, len); bytes.size() == len)
    return word_scan_detail::each_word(bytes, first, fn);
  std::uint64_t buf[512];
  for (Address a = first; a + 8 <= end; a += sizeof buf) {
    const std::size_t want = static_cast<std::size_t>(std::min<Address>(sizeof buf, (end - a) & ~Address{7}));
    // A hole (bytes the image lacks) ends this buffer early; the next buffer starts past it.
    const std::size_t got = image.read(a, buf, want) / 8;
    for (std::size_t i = 0; i < got; ++i) fn(a + i * 8, buf[i]);
  }
}

// The same through a cursor, which keeps the region it last read: for many small ranges in a row (every
// block of a heap), one region lookup instead of one per range.
template <typename Fn>
void for_each_word(MemoryCursor& memory, Address start, Address end, Fn&& fn) {
  const auto [first, len] = word_scan_detail::aligned_words(start, end);
  if (len == 0) return;
  if (const std::span<const std::byte> bytes = memory.span(first, len); bytes.size() == len)
    return word_scan_detail::each_word(bytes, first, fn);
  for_each_word(memory.image(), start, end, fn);
}

}  // namespace heapscope
