// A hand-made heap for the graph and analysis tests: `blocks` chunks of 32 bytes (24 usable) in a fake
// image, block i's user pointer at kHeap + 32*i + 16, and one anonymous root range to anchor them from.
#pragma once

#include <vector>

#include "fake_image.h"
#include "model/roots.h"
#include "heap/heap_model.h"

namespace heapscope::testing {

struct SmallHeap {
  static constexpr Address kHeap = 0x555555560000;
  static constexpr Address kGlobals = 0x555555550000;

  FakeImage image;
  HeapModel heap;
  RootSet roots;

  explicit SmallHeap(int blocks, std::vector<BlockState> states = {}) {
    image.add_region(kHeap, 0x10000);
    image.add_region(kGlobals, 0x1000);
    for (int i = 0; i < blocks; ++i) {
      Block b;
      b.chunk = kHeap + 32 * i;
      b.size_units = 2;
      b.state = i < static_cast<int>(states.size()) ? states[i] : BlockState::in_use;
      b.arena = 0;
      heap.blocks.push_back(b);
    }
    ArenaInfo arena;
    arena.heaps.push_back({kHeap, kHeap + 0x10000});
    heap.arenas.push_back(arena);
    RootRange globals;
    globals.kind = RootKind::anonymous;
    globals.start = kGlobals;
    globals.end = kGlobals + 0x1000;
    roots.ranges.push_back(globals);
  }
  static Address user(int i) { return kHeap + 32 * i + 16; }
  // Block `from`'s word `word` points to block `to` (plus `delta` bytes: an interior pointer).
  void link(int from, int to, int word = 0, Address delta = 0) { image.put(user(from) + 8 * word, user(to) + delta); }
  // Root word `slot` points to block `to`.
  void anchor(int to, int slot = 0, Address delta = 0) { image.put(kGlobals + 8 * slot, user(to) + delta); }
};

}  // namespace heapscope::testing
