// The glibc walker's pieces on hand-made heaps: chunk states, damage, fenceposts, free lists, mmapped
// chunks.
#include <catch2/catch.hpp>

#include <atomic>
#include <limits>
#include <optional>
#include <thread>

#include "fake_image.h"
#include "runtime/glibc/chunk_walk.h"
#include "runtime/glibc/free_lists.h"
#include "runtime/glibc/mmapped_chunks.h"

using namespace heapscope;
using namespace heapscope::glibc;
using heapscope::testing::FakeImage;

namespace {

constexpr Address kHeap = 0x555555559000;
constexpr Address kArena = 0x7ffff7e19c80;

// An arena's pages and a heap page: where the free lists' tests put their bins and chunks.
FakeImage arena_and_heap() {
  FakeImage img;
  img.add_region(kArena & ~0xfffull, 0x2000);
  img.add_region(kHeap, 0x1000);
  return img;
}

// A walk into a buffer of its own, as the walker does into its slice of the block array.
struct Walked {
  std::vector<Block> blocks;
  SegmentWalk result;
};

Walked walk(MemoryCursor& mem, Address first, Address end, Address top, std::uint16_t arena) {
  Walked w;
  w.blocks.resize(max_chunks(first, end));
  BlockSink sink{w.blocks.data(), w.blocks.size(), 0};
  w.result = walk_segment(mem, first, end, top, arena, sink);
  w.blocks.resize(sink.count);
  REQUIRE(w.result.blocks == sink.count);
  // The totals the walk counts as it goes are those of the blocks it found.
  StateTotals counted{};
  for (const Block& b : w.blocks) counted[static_cast<int>(b.state)].add(b.chunk_size());
  for (int state = 0; state < kBlockStateCount; ++state) {
    REQUIRE(w.result.totals[state].blocks == counted[state].blocks);
    REQUIRE(w.result.totals[state].bytes == counted[state].bytes);
  }
  return w;
}

std::vector<BlockState> states(const Walked& w) {
  std::vector<BlockState> out;
  for (const Block& b : w.blocks) out.push_back(b.state);
  return out;
}

}  // namespace

TEST_CASE("chunk walk: a chunk is in use when its successor's PREV_INUSE bit is set") {
  FakeImage img;
  img.add_region(kHeap, 0x1000);
  img.chunk(kHeap, 0x20 | kPrevInUse);            // A in use (B has P set)
  img.chunk(kHeap + 0x20, 0x30 | kPrevInUse);     // B free (C has P clear)
  img.chunk(kHeap + 0x50, 0x40, 0x30);            // C in use
  img.chunk(kHeap + 0x90, (0x1000 - 0x90) | kPrevInUse);  // top
  MemoryCursor mem(img);
  const Walked w = walk(mem, kHeap, kHeap + 0x1000, kHeap + 0x90, 3);
  REQUIRE(w.result.reached_end);
  REQUIRE(w.result.warnings.empty());
  CHECK(states(w) == std::vector{BlockState::in_use, BlockState::free, BlockState::in_use, BlockState::top});
  CHECK(w.blocks[1].chunk_size() == 0x30);
  CHECK(w.blocks[0].address() == kHeap + 16);
  CHECK(w.blocks[0].usable_size() == 0x18);
  CHECK(w.blocks[2].arena == 3);
  CHECK(w.result.overhead_bytes == 0);
}

TEST_CASE("chunk walk: a damaged size stops the heap with a warning naming the last good chunk") {
  FakeImage img;
  img.add_region(kHeap, 0x1000);
  img.chunk(kHeap, 0x20 | kPrevInUse);
  img.chunk(kHeap + 0x20, 0x4141414141414141);  // overwritten by a buffer overflow
  MemoryCursor mem(img);
  const Walked w = walk(mem, kHeap, kHeap + 0x1000, kHeap + 0x900, 0);
  CHECK_FALSE(w.result.reached_end);
  REQUIRE(w.result.warnings.size() == 1);
  CHECK_THAT(w.result.warnings[0], Catch::Contains("0x555555559020") && Catch::Contains("last good chunk: 0x555555559000"));
  CHECK(w.blocks.size() == 1);
}

TEST_CASE("chunk walk: a size that runs past the heap or is too small is damage, not an endless loop") {
  FakeImage img;
  img.add_region(kHeap, 0x1000);
  SECTION("past the end") { img.chunk(kHeap, 0x2000 | kPrevInUse); }
  SECTION("zero-sized successor loop") { img.chunk(kHeap, 0x10 | kPrevInUse); img.chunk(kHeap + 0x10, 0x10); }
  MemoryCursor mem(img);
  const Walked w = walk(mem, kHeap, kHeap + 0x1000, kHeap + 0x800, 0);
  CHECK_FALSE(w.result.reached_end);
  CHECK(w.result.warnings.size() == 1);
}

TEST_CASE("chunk walk: the fencepost pair ends an old heap and counts as overhead") {
  constexpr Address kOldHeap = 0x7ffff0000000;
  FakeImage img;
  img.add_region(kOldHeap, 0x2000);
  const Address first = kOldHeap + 48;  // after heap_info
  img.chunk(first, 0x100 | kPrevInUse);
  img.chunk(first + 0x100, 0x200 | kPrevInUse);          // freed old top, in a bin
  img.chunk(first + 0x300, 0x10, 0x200);                  // fencepost 1: 16 bytes, P clear
  img.chunk(first + 0x310, 0x0 | kPrevInUse);             // fencepost 2: size 0
  const Address end = first + 0x330;
  MemoryCursor mem(img);
  const Walked w = walk(mem, first, end, 0, 1);
  REQUIRE(w.result.reached_end);
  CHECK(states(w) == std::vector{BlockState::in_use, BlockState::free});
  CHECK(w.result.overhead_bytes == 0x30);
}

TEST_CASE("tcache lists are followed through safe-linked pointers for at most their count") {
  FakeImage img;
  img.add_region(kHeap, 0x2000);
  const Layout l = layout_for(36);
  const Address tcache = kHeap + 0x10;           // tcache_perthread_struct (user memory of its chunk)
  const Address e1 = kHeap + 0x400, e2 = kHeap + 0x500;
  img.put(tcache + 2 * 2, 2);                     // counts[2] = 2 (uint16)
  img.put(tcache + l.tcache_entries_offset() + 2 * 8, e1);  // entries[2] = e1 (plain pointer)
  img.put(e1, (e1 >> 12) ^ e2);                   // e1->next = PROTECT_PTR(&e1->next, e2)
  img.put(e2, (e2 >> 12) ^ 0);
  const FreeListMembers m = tcache_members(img, l, tcache, 7);
  CHECK(m.warnings.empty());
  CHECK(m.chunks == std::vector<Address>{e1 - 16, e2 - 16});

  img.put(tcache + 2 * 2, 3);  // the count promises a third entry the list does not have
  const FreeListMembers short_list = tcache_members(img, l, tcache, 7);
  REQUIRE(short_list.warnings.size() == 1);
  CHECK_THAT(short_list.warnings[0], Catch::Contains("3 chunks") && Catch::Contains("2 were found"));
}

TEST_CASE("before glibc 2.32 list pointers are stored plainly") {
  const Layout old = layout_for(31);
  CHECK_FALSE(old.safe_linking);
  CHECK(reveal_pointer(old, 0x1000, 0x5678) == 0x5678);
  CHECK(reveal_pointer(layout_for(32), 0x1000, 0x5678) == (0x1 ^ 0x5678));
  CHECK(layout_for(29).tcache_chunk_size() == 0x250);
  CHECK(layout_for(30).tcache_chunk_size() == 0x290);
  CHECK(layout_for(34).heap_info_size == 32);
  CHECK(layout_for(35).heap_info_size == 48);
}

TEST_CASE("a cyclic fastbin is cut off with a warning") {
  FakeImage img = arena_and_heap();
  const Layout l = layout_for(36);
  const Address a = kHeap + 0x100, b = kHeap + 0x200;
  img.put(kArena + l.arena.fastbins + 8, a);
  img.put(a + 16, ((a + 16) >> 12) ^ b);
  img.put(b + 16, ((b + 16) >> 12) ^ a);  // b → a: a double free made a cycle
  const FreeListMembers m = fastbin_members(img, l, kArena, 10);
  CHECK(m.chunks.size() == 10);
  REQUIRE(m.warnings.size() == 1);
  CHECK_THAT(m.warnings[0], Catch::Contains("fastbin 1"));
}

TEST_CASE("the regular bins' chunks are counted, and a cyclic bin stops at the bound the walk sets") {
  FakeImage img = arena_and_heap();
  const Layout l = layout_for(36);
  // Every bin empty (its fd at its own pseudo-chunk), but the unsorted bin (1) with a, b and bin 5 with c.
  for (int bin = 1; bin < l.arena.bin_count; ++bin) img.put(l.bin_at(kArena, bin) + 16, l.bin_at(kArena, bin));
  const Address a = kHeap + 0x100, b = kHeap + 0x200, c = kHeap + 0x300;
  const Address unsorted = l.bin_at(kArena, 1), small = l.bin_at(kArena, 5);
  img.put(unsorted + 16, a);  // fd pointers: not safe-linked in the regular bins
  img.put(a + 16, b);
  img.put(b + 16, unsorted);
  img.put(small + 16, c);
  img.put(c + 16, small);
  const std::atomic<std::size_t> unbounded{std::numeric_limits<std::size_t>::max()};
  CHECK(regular_bin_count(img, l, kArena, unbounded) == 3u);
  const std::atomic<std::size_t> two{2};
  CHECK(!regular_bin_count(img, l, kArena, two));  // longer than the heap has blocks: damaged

  img.put(b + 16, a);  // b → a: the unsorted bin no longer leads back to its head
  const std::atomic<std::size_t> blocks{1000};
  CHECK(!regular_bin_count(img, l, kArena, blocks));
  // Unbounded at first (the walk beside it has not finished), the count ends once the bound is set.
  std::atomic<std::size_t> bound{std::numeric_limits<std::size_t>::max()};
  std::optional<std::uint64_t> counted = 0;
  std::thread count([&] { counted = regular_bin_count(img, l, kArena, bound); });
  bound = 1000;
  count.join();
  CHECK(!counted);
}

TEST_CASE("mmapped chunks are found at mapping starts, also memalign'ed and in merged mappings") {
  constexpr Address kMap = 0x7ffff7000000;
  FakeImage img;
  img.add_region(kMap, 0x40000);
  img.chunk(kMap, 0x21000 | kIsMmapped);                          // plain: header at the mapping start
  const Address second = kMap + 0x21000;                          // a neighbouring mapping the kernel merged
  img.chunk(second, 0x10000 | kIsMmapped);                        // original header stays...
  const Address lead = 0x1000 - 16;                               // ...memalign(4096) moved it here
  img.chunk(second + lead, (0x10000 - lead) | kIsMmapped, lead);
  MemoryCursor mem(img);
  const MmappedChunks found = find_mmapped_chunks(mem, {});
  REQUIRE(found.blocks.size() == 2);
  CHECK(found.blocks[0].chunk == kMap);
  CHECK(found.blocks[0].usable_size() == 0x21000 - 16);
  CHECK(found.blocks[1].address() == second + 0x1000);
  CHECK(found.blocks[1].chunk_size() == 0x10000 - lead);
  CHECK(found.mapped_bytes == 0x21000 + 0x10000);

  const MmappedChunks excluded = find_mmapped_chunks(mem, {{kMap, kMap + 0x40000}});
  CHECK(excluded.blocks.empty());
}

// mprotect on part of an mmapped chunk (a read-only stretch, a PROT_NONE guard page) splits its mapping:
// the chunk spans adjacent mappings of different permissions.
TEST_CASE("an mmapped chunk whose mapping mprotect split is found across the pieces, but not across a hole") {
  constexpr Address kMap = 0x7ffff7000000;
  const auto split_chunk_image = [](FakeImage& img, bool guard_page_in_image) {
    img.add_region(kMap, 0x8000);
    img.add_region(kMap + 0x8000, 0x1000);
    img.protect(kMap + 0x8000, true, false);  // read-only
    img.add_region(kMap + 0x9000, 0x6000);
    if (guard_page_in_image) {
      img.add_region(kMap + 0xf000, 0x1000);
      img.protect(kMap + 0xf000, false, false);  // PROT_NONE
    }
    img.add_region(kMap + 0x10000, 0x2000);  // the next chunk's own mapping
    img.chunk(kMap, 0x10000 | kIsMmapped);
    img.chunk(kMap + 0x10000, 0x2000 | kIsMmapped);
  };

  FakeImage whole;
  split_chunk_image(whole, true);
  MemoryCursor mem(whole);
  const MmappedChunks found = find_mmapped_chunks(mem, {});
  REQUIRE(found.blocks.size() == 2);
  CHECK(found.blocks[0].chunk == kMap);
  CHECK(found.blocks[0].chunk_size() == 0x10000);
  CHECK(found.blocks[1].chunk == kMap + 0x10000);
  CHECK(found.mapped_bytes == 0x12000);

  // A piece the image lacks (a core that left out the guard page) leaves the chunk's extent unknown: it is
  // not taken on trust, and the walk's count check against mp_ reports it.
  FakeImage holed;
  split_chunk_image(holed, false);
  MemoryCursor holed_mem(holed);
  const MmappedChunks holed_found = find_mmapped_chunks(holed_mem, {});
  REQUIRE(holed_found.blocks.size() == 1);
  CHECK(holed_found.blocks[0].chunk == kMap + 0x10000);
}
