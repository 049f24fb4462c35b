// The fragmentation census (queries/fragmentation.h) on hand-made heap models: fill buckets, page and
// region counting, glibc's trim arithmetic and the trim blockers beneath top.
#include <catch2/catch.hpp>

#include <numeric>

#include "queries/fragmentation.h"
#include "runtime/glibc/glibc_trim.h"

using namespace heapscope;
using glibc::madvisable_bytes;
using glibc::trimmable_top_bytes;

namespace {

constexpr Address kHeapStart = 0x555555560000;  // 64 KiB aligned
constexpr std::uint64_t kPage = kFragmentationPageBytes;

// A heap model built chunk by chunk upwards from kHeapStart in one arena; the last chunk added with
// top() ends the arena's only heap.
struct ModelBuilder {
  HeapModel heap;
  Address next = kHeapStart;

  ModelBuilder() {
    ArenaInfo arena;
    arena.is_main = true;
    arena.address = 0x7ffff7e19c80;
    heap.arenas.push_back(arena);
  }
  BlockId add(std::uint64_t bytes, BlockState state) {
    Block b;
    b.chunk = next;
    b.size_units = static_cast<std::uint32_t>(bytes / 16);
    b.state = state;
    heap.blocks.push_back(b);
    next += bytes;
    return static_cast<BlockId>(heap.blocks.size() - 1);
  }
  void top(std::uint64_t bytes) {
    add(bytes, BlockState::top);
    heap.arenas[0].heaps.push_back({kHeapStart, next});
    heap.arenas[0].system_bytes = next - kHeapStart;
  }
};

std::uint64_t sum(const FillBuckets& b) { return std::accumulate(b.begin(), b.end(), std::uint64_t{0}); }

// One arena's numbers with glibc's trimming rules under `trim`, as the fragmentation query puts them together.
ArenaFragmentation glibc_arena(const HeapModel& heap, TrimSettings trim, std::size_t max_blockers,
                               std::vector<BlockId>* ids) {
  return arena_fragmentation(heap, 0, glibc::arena_trim(heap, 0, trim, max_blockers, kPage), ids);
}

}  // namespace

TEST_CASE("fill buckets: 0–10 % includes 10 %, each next bucket starts just above its lower bound") {
  CHECK(fill_bucket(0, 4096) == 0);
  CHECK(fill_bucket(409, 4096) == 0);
  CHECK(fill_bucket(10, 100) == 0);
  CHECK(fill_bucket(11, 100) == 1);
  CHECK(fill_bucket(20, 100) == 1);
  CHECK(fill_bucket(21, 100) == 2);
  CHECK(fill_bucket(99, 100) == 9);
  CHECK(fill_bucket(100, 100) == 9);
}

TEST_CASE("occupancy counter: untouched pages in bulk, a partial last page, whole pages inside one block") {
  std::vector<BlockId> sparse;
  OccupancyCounter pages(kPage, [&](BlockId b) { sparse.push_back(b); });
  // Ten pages and a half: a 208-byte block in page 0 (5 %), 2048 bytes in page 2 (50 %), one block from
  // the middle of page 4 to the middle of page 7 (4 and 7 half used, 5 and 6 full), nothing in 8 and 9,
  // and 100 bytes in the last half page (100 of 2048: 4.9 %).
  pages.begin_range(kHeapStart, kHeapStart + 10 * kPage + kPage / 2);
  pages.add_live(kHeapStart + 64, kHeapStart + 64 + 208, 1);
  pages.add_live(kHeapStart + 2 * kPage, kHeapStart + 2 * kPage + 2048, 2);
  pages.add_live(kHeapStart + 4 * kPage + 2048, kHeapStart + 7 * kPage + 2048, 3);
  pages.add_live(kHeapStart + 10 * kPage, kHeapStart + 10 * kPage + 100, 4);
  pages.end_range();
  const FillBuckets& b = pages.buckets();
  CHECK(pages.granules() == 11);
  CHECK(b[0] == 6);  // pages 0, 1, 3, 8, 9 and the half page
  CHECK(b[4] == 3);  // pages 2, 4 and 7: exactly 50 %
  CHECK(b[9] == 2);  // pages 5 and 6
  CHECK(sparse == std::vector<BlockId>{1, 4});
}

TEST_CASE("occupancy counter: a block of a page or more pins no sparse page of its own ends") {
  // A 20 KiB block starting 64 bytes before page 1 ends (jemalloc's cache-oblivious large placement): its
  // first page is 1.6 % used, yet the block is no small block left among free ones. A 64-byte one alone in
  // page 8 is.
  std::vector<BlockId> sparse;
  OccupancyCounter pages(kPage, [&](BlockId b) { sparse.push_back(b); });
  pages.begin_range(kHeapStart, kHeapStart + 10 * kPage);
  pages.add_live(kHeapStart + 2 * kPage - 64, kHeapStart + 2 * kPage - 64 + 20 * 1024, 1);
  pages.add_live(kHeapStart + 8 * kPage, kHeapStart + 8 * kPage + 64, 2);
  pages.end_range();
  CHECK(pages.buckets()[0] == 5);  // pages 0, 1 (the large block's head), 7, 8, 9
  CHECK(sparse == std::vector<BlockId>{2});
}

TEST_CASE("occupancy counter: a block ending on the range's last page boundary, and an empty range") {
  OccupancyCounter pages(kPage);
  pages.begin_range(kHeapStart, kHeapStart + 3 * kPage);
  pages.add_live(kHeapStart + kPage, kHeapStart + 3 * kPage);
  pages.end_range();
  CHECK(pages.buckets()[0] == 1);
  CHECK(pages.buckets()[9] == 2);
  pages.begin_range(kHeapStart, kHeapStart);
  pages.add_live(kHeapStart, kHeapStart + 16);
  pages.end_range();
  CHECK(pages.granules() == 3);
}

TEST_CASE("glibc trim arithmetic: whole pages beyond pad + MINSIZE, and mtrim's pages inside a free chunk") {
  CHECK(trimmable_top_bytes(4096, 0, kPage) == 0);            // 4096 - 33 rounds down to 0
  CHECK(trimmable_top_bytes(4096 + 33, 0, kPage) == 4096);
  CHECK(trimmable_top_bytes(200 * 1024, 128 * 1024, kPage) == 68 * 1024);  // 72 KiB - 33, down to pages
  CHECK(trimmable_top_bytes(1000, 128 * 1024, kPage) == 0);
  // A chunk at a page start: its first page holds the bin pointers, so madvise starts one page in.
  CHECK(madvisable_bytes(kHeapStart, 3 * kPage, kPage) == 2 * kPage);
  CHECK(madvisable_bytes(kHeapStart + kPage - 48, 2 * kPage + 48, kPage) == 2 * kPage);
  CHECK(madvisable_bytes(kHeapStart + 16, kPage + 32, kPage) == 0);
}

TEST_CASE("arena numbers: bytes per state, largest free chunk, the free() trim and malloc_trim(0)") {
  ModelBuilder m;
  m.add(0x290, BlockState::in_use);           // tcache_perthread_struct
  m.add(3 * kPage, BlockState::free);         // a bin chunk with whole pages inside
  m.add(0x40, BlockState::fastbin);           // joins it when malloc_trim consolidates
  m.add(0xd0, BlockState::in_use);
  m.add(0xd0, BlockState::tcache);
  m.add(0x1000, BlockState::free);            // reaches top: malloc_consolidate merges it into top
  m.top(40 * kPage);
  const TrimSettings trim{128 * 1024, 0};
  std::vector<BlockId> ids;
  ArenaFragmentation a = glibc_arena(m.heap, trim, 5, &ids);
  CHECK(a.in_use_bytes == 0x290 + 0xd0);
  CHECK(a.in_use_blocks == 2);
  CHECK(a.free_bytes == 3 * kPage + 0x1000);
  CHECK(a.fastbin_bytes == 0x40);
  CHECK(a.tcache_bytes == 0xd0);
  CHECK(a.top_bytes == 40 * kPage);
  CHECK(a.largest_free_chunk == 3 * kPage);
  // 40 pages of top (160 KiB) reach the 128 KiB threshold: whole pages beyond MINSIZE, no pad kept.
  CHECK(a.trim_on_free == 39 * kPage);
  // The first free run is [0x290, 0x290 + 3 pages + 0x40): pages from the first boundary past its bin
  // pointers (kHeapStart + 1 page) up to its end, rounded down.
  CHECK(a.malloc_trim_madvised == madvisable_bytes(kHeapStart + 0x290, 3 * kPage + 0x40, kPage));
  const Address top_start = m.heap.blocks[6].chunk;
  const Address heap_end = top_start + 40 * kPage;
  CHECK(a.malloc_trim_returned == trimmable_top_bytes(heap_end - (top_start - 0x1000), 0, kPage));
  // Blockers from top down: the tcache chunk, then the in-use chunk (freeing it lets top reach the
  // consolidated run beneath), then the tcache_perthread_struct.
  REQUIRE(a.blockers.size() == 3);
  CHECK(ids == std::vector<BlockId>{4, 3, 0});
  CHECK(a.blockers[0].state == "tcache");
  CHECK(a.blockers[0].bytes_above == heap_end - m.heap.blocks[4].chunk);
  const std::uint64_t now = trimmable_top_bytes(40 * kPage, 0, kPage);
  CHECK(a.blockers[0].returnable_if_freed == trimmable_top_bytes(heap_end - (top_start - 0x1000 - 0xd0), 0, kPage) - now);
  CHECK(a.blockers[1].returnable_if_freed ==
        trimmable_top_bytes(heap_end - (kHeapStart + 0x290), 0, kPage) - now);
  CHECK(a.blockers[2].returnable_if_freed == trimmable_top_bytes(heap_end - kHeapStart, 0, kPage) - now);
}

TEST_CASE("free()'s trim only runs once top reaches trim_threshold, and keeps top_pad") {
  ModelBuilder m;
  m.add(0xd0, BlockState::in_use);
  m.top(64 * kPage);  // 256 KiB
  std::vector<BlockId> ids;
  CHECK(glibc_arena(m.heap, {512 * 1024, 0}, 5, &ids).trim_on_free == 0);
  CHECK(glibc_arena(m.heap, {128 * 1024, 0}, 5, &ids).trim_on_free == 63 * kPage);
  CHECK(glibc_arena(m.heap, {128 * 1024, 128 * 1024}, 5, &ids).trim_on_free == 31 * kPage);
  CHECK(glibc_arena(m.heap, {128 * 1024, 0}, 0, &ids).blockers.empty());
}

TEST_CASE("count_occupancy: pages and regions of a heap up to its top chunk, live blocks only") {
  ModelBuilder m;
  // 20 pages of 208-byte chunks, one in use at the start of each page, the rest of the page free.
  for (int p = 0; p < 20; ++p) {
    m.add(0xd0, BlockState::in_use);
    m.add(kPage - 0xd0, BlockState::free);
  }
  m.add(13 * kPage, BlockState::in_use);  // 13 full pages: regions 0 and 1 split at page 16
  m.top(100 * kPage);
  std::vector<BlockId> sparse;
  OccupancyCounter pages(kPage, [&](BlockId b) { sparse.push_back(b); });
  OccupancyCounter regions(kFragmentationRegionBytes);
  count_occupancy(m.heap, pages, regions);
  CHECK(pages.granules() == 33);
  CHECK(pages.buckets()[0] == 20);
  CHECK(pages.buckets()[9] == 13);
  CHECK(sparse.size() == 20);
  // Region 0: pages 0–15, 5 % full. Region 1: pages 16–19 sparse and 12 full pages of 16 (16 + 12·4096 of
  // 64 KiB): over 70 %. Region 2: one page, full.
  CHECK(regions.granules() == 3);
  CHECK(regions.buckets()[0] == 1);
  CHECK(regions.buckets()[7] == 1);
  CHECK(regions.buckets()[9] == 1);
  CHECK(sum(regions.buckets()) == 3);
}
