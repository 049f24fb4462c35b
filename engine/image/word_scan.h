// Visiting every aligned 64-bit word of an address range, zero-copy where the image allows. The pointer
// scan of the graph and the type inference both walk memory this way.
#pragma once

#include <algorithm>
#include <cstring>

#include "image/image.h"

namespace heapscope {

// Calls fn(address_of_word, value) for each 8-byte-aligned word in [start, end) that the image has.
template <typename Fn>
void for_each_word(const Image& image, Address start, Address end, Fn&& fn) {
  start = (start + 7) & ~Address{7};
  if (start >= end) return;
  const std::size_t len = static_cast<std::size_t>(end - start) & ~std::size_t{7};
  const std::span<const std::byte> bytes = image.view(start, len);
  if (bytes.size() == len) {
    for (std::size_t off = 0; off < len; off += 8) {
      std::uint64_t w;
      std::memcpy(&w, bytes.data() + off, 8);
      fn(start + off, w);
    }
    return;
  }
  std::uint64_t buf[512];
  for (Address a = start; a + 8 <= end; a += sizeof buf) {
    const std::size_t want = static_cast<std::size_t>(std::min<Address>(sizeof buf, (end - a) & ~Address{7}));
    // A hole (bytes the image lacks) ends this buffer early; the next buffer starts past it.
    const std::size_t got = image.read(a, buf, want) / 8;
    for (std::size_t i = 0; i < got; ++i) fn(a + i * 8, buf[i]);
  }
}

}  // namespace heapscope
