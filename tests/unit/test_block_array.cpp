// BlockArray::compact closes the gaps between the walkers' slices: every block lands where the blocks
// before it end, in order, whether a slice moves a little or far, a few blocks or millions (which move in
// waves on all cores).
#include <catch2/catch.hpp>

#include "heap/block_array.h"

using namespace heapscope;

namespace {

Block numbered(std::size_t i) {
  Block b;
  b.chunk = 0x1000 + 16 * i;
  b.size_units = static_cast<std::uint32_t>(i);
  return b;
}

// Fills each slice with consecutive numbers, compacts, and checks the numbers run 0, 1, 2... to the end.
bool compacts_in_order(std::size_t capacity, const std::vector<BlockArray::Slice>& slices) {
  BlockArray blocks(capacity);
  std::size_t next = 0;
  for (const BlockArray::Slice& s : slices)
    for (std::size_t k = 0; k < s.used; ++k) blocks[s.offset + k] = numbered(next++);
  blocks.compact(slices);
  if (blocks.size() != next) return false;
  for (std::size_t i = 0; i < next; ++i)
    if (blocks[i].size_units != i || blocks[i].chunk != numbered(i).chunk) return false;
  return true;
}

}  // namespace

TEST_CASE("block array: compaction keeps every block, in order, however far and however many move") {
  constexpr std::size_t kMillion = 1 << 20;
  // A few blocks; an empty slice; a slice already in place.
  CHECK(compacts_in_order(100, {{0, 3}, {10, 0}, {20, 5}, {90, 10}}));
  CHECK(compacts_in_order(100, {{0, 50}, {50, 50}}));
  // Millions of blocks moved by a short distance (one memmove, the ranges overlapping).
  CHECK(compacts_in_order(3 * kMillion, {{0, kMillion}, {kMillion + 1000, 2 * kMillion - 1000}}));
  // Millions moved far, in waves shorter than the slice (each wave's destination is what earlier ones left).
  CHECK(compacts_in_order(4 * kMillion, {{0, kMillion}, {kMillion + 300000, 2 * kMillion}}));
  // Moved farther than the slice is long: one wave.
  CHECK(compacts_in_order(5 * kMillion, {{0, 100}, {3 * kMillion, kMillion}}));
}
