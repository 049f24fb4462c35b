// Fuzz target: the glibc heap walker and `verify` over a damaged main arena. The input's bytes replace,
// from the front, the arena's two pages and then the heap page of the hand-made arena in
// tests/unit/synthetic_arena.h (a chunk of every kind, tcache, fastbins, a small bin, top), so mutations
// of the seed — that arena's own bytes — are damaged heaps: sizes, links, counts, top.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/glibc/glibc_heap.h"
#include "runtime/glibc/glibc_verify.h"
#include "synthetic_arena.h"

using namespace heapscope;
using namespace heapscope::testing;

namespace {

constexpr Address kArenaPages = kArena & ~0xfffull;

// The layout's regions in the order the input fills them.
std::vector<Address> region_starts() { return {kArenaPages, kHeap}; }

}  // namespace

// The seed: the undamaged arena's bytes, in the order the input replaces them.
std::vector<std::uint8_t> fuzz_seed() {
  MainArenaLayout layout;
  std::vector<std::uint8_t> seed;
  for (Address start : region_starts()) {
    const std::vector<std::byte>& bytes = layout.image.bytes_of(start);
    for (std::byte b : bytes) seed.push_back(static_cast<std::uint8_t>(b));
  }
  return seed;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  MainArenaLayout layout;
  std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  for (Address start : region_starts()) {
    const std::size_t region_size = layout.image.bytes_of(start).size();
    layout.image.fill(start, input.first(std::min(region_size, input.size())));
    input = input.subspan(std::min(region_size, input.size()));
  }
  const HeapModel model = glibc::walk_heap(layout.image, layout.runtime);
  (void)glibc::verify_heap(layout.image, layout.runtime, model);
  return 0;
}
