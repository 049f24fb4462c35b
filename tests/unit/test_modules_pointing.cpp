// Which modules' data point to blocks (types/dwarf_typing.h): the modules whose variables DWARF typing
// reads, and whose type indexes `top` builds ahead. A module is in only for a word at a block's start.
#include <catch2/catch.hpp>

#include "model/block_index.h"
#include "small_heap.h"
#include "types/dwarf_typing.h"

using namespace heapscope;

namespace {

constexpr Address kData = 0x7f0000010000;  // each module's data: kData + 0x1000 * module

RootRange global_range(std::uint32_t module, Address start, Address end) {
  RootRange r;
  r.kind = RootKind::global;
  r.module = module;
  r.start = start;
  r.end = end;
  return r;
}

}  // namespace

TEST_CASE("a module's data points to blocks only with a word at a block's start") {
  testing::SmallHeap f(4);
  for (int m = 0; m < 4; ++m) {
    f.image.add_code(0x7f0000100000 + 0x10000 * static_cast<Address>(m), 0x1000, "lib" + std::to_string(m) + ".so");
    f.image.add_region(kData + 0x1000 * static_cast<Address>(m), 0x1000);
  }
  // lib0: a pointer to block 1's start among other words.
  f.image.put(kData + 0x10, 42);
  f.image.put(kData + 0x18, testing::SmallHeap::user(1));
  f.roots.ranges.push_back(global_range(0, kData, kData + 0x1000));
  // lib1: only a pointer into block 2's middle, and one to a free address past the blocks.
  f.image.put(kData + 0x1000, testing::SmallHeap::user(2) + 8);
  f.image.put(kData + 0x1008, testing::SmallHeap::user(40));
  f.roots.ranges.push_back(global_range(1, kData + 0x1000, kData + 0x2000));
  // lib2: its pointer to block 3 lies between its two global ranges (a finalizer's slot, carved out).
  f.image.put(kData + 0x2800, testing::SmallHeap::user(3));
  f.roots.ranges.push_back(global_range(2, kData + 0x2000, kData + 0x2800));
  f.roots.ranges.push_back(global_range(2, kData + 0x2808, kData + 0x3000));
  // lib3: a pointer to block 0, but no global range: nothing of it is data the roots know.
  f.image.put(kData + 0x3000, testing::SmallHeap::user(0));

  const BlockIndex index(f.heap);
  const std::vector<bool> pointing = modules_pointing_to_blocks(f.image, index, f.roots, {});
  REQUIRE(pointing.size() == 4);
  CHECK(pointing[0]);
  CHECK_FALSE(pointing[1]);
  CHECK(pointing[2]);
  CHECK_FALSE(pointing[3]);
}
