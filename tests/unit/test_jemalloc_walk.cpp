// The jemalloc walker (runtime/jemalloc) on a hand-made jemalloc 5.3 heap in a fake image: the size class
// table, the bins' geometry, arena 0 with its metadata allocator and statistics, an extent map whose one
// leaf maps a slab, a large extent, dirty pages and retained address space, and one thread cache whose
// stacks live in a slab region. The globals are found at their placements or by a scan, and look-alikes are
// rejected; the walk gives each region its state and its figures equal jemalloc's counters; damage gives
// warnings and a partial model, never a hang.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <numeric>

#include "fake_image.h"
#include "runtime/jemalloc/jemalloc_heap.h"
#include "runtime/jemalloc/jemalloc_runtime.h"
#include "symbols/module_symbols.h"

using namespace heapscope;
using namespace heapscope::jemalloc;
using heapscope::testing::FakeImage;

namespace {

constexpr Address kGlobals = 0x7f0000000000;  // the library's writable data
constexpr Address kSizeTable = kGlobals + 0x100;
constexpr Address kBinInfos = kGlobals + 0x1000;
constexpr Address kArenas = kGlobals + 0x2000;
constexpr Address kEmap = kGlobals + 0x10000;
constexpr std::size_t kGlobalsBytes = 0x300000;
constexpr Address kCode = 0x7f0000800000;  // the library's code: its default extent hooks
constexpr Address kArena = 0x7f0001000000;
constexpr Address kBaseBlock = 0x7f0001100000;  // arena 0's metadata block, its base_t inside
constexpr Address kBase = kBaseBlock + 0x100;
constexpr Address kEdata = 0x7f0001200000;
constexpr Address kLeaf = 0x7f0001400000;
constexpr Address kTcache = 0x7f0001600000;  // a thread cache's descriptor, its bins after it
constexpr Address kBins = kTcache + 0x100;
constexpr Address kHeap = 0x555555600000;

constexpr std::uint32_t kSlabClass = 3;  // 48-byte regions: 85 in a page, 16 bytes left over
constexpr std::uint64_t kRegion = 48;
constexpr std::uint32_t kRegions = 85;
constexpr std::uint32_t kLargeClass = 36;  // 16 KiB, the first large class
constexpr Address kLarge = kHeap + kPageBytes;  // 5 pages: 16 KiB and the cache-oblivious page
constexpr Address kLargeUser = kLarge + 3 * 64;
constexpr Address kDirty = kHeap + 6 * kPageBytes;  // 2 pages
constexpr Address kRetained = kHeap + 8 * kPageBytes;  // 4 pages, not in the image

Address region(std::uint64_t i) { return kHeap + i * kRegion; }
Address edata(int i) { return kEdata + 128 * i; }

std::vector<std::uint64_t> size_classes() {
  // jemalloc's classes with a 16-byte quantum: 8, 16, 32, 48, 64, then four per doubling.
  std::vector<std::uint64_t> sizes{8, 16, 32, 48, 64};
  for (unsigned lg = 6; sizes.size() < kSizeClasses; ++lg)
    for (std::uint64_t k = 1; k <= 4 && sizes.size() < kSizeClasses; ++k)
      sizes.push_back((std::uint64_t{1} << lg) + k * (std::uint64_t{1} << (lg - 2)));
  return sizes;
}

struct JeHeap {
  FakeImage image;
  Runtime rt;

  JeHeap() {
    const Layout& l = layout_5_3();
    image.add_region(kGlobals, kGlobalsBytes, "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    image.add_code(kCode, 0x1000, "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    image.add_region(kArena, 0x20000);
    image.add_region(kBaseBlock, 0x2000);
    image.add_region(kEdata, 0x1000);
    image.add_region(kLeaf, std::size_t{8} << RtreeLayout::kLeafBits);
    image.add_region(kTcache, 0x1000);
    image.add_region(kHeap, 8 * kPageBytes);

    const std::vector<std::uint64_t> sizes = size_classes();
    for (std::size_t i = 0; i < sizes.size(); ++i) image.put(kSizeTable + 8 * i, sizes[i]);
    for (std::size_t i = 0; i < kSmallClasses; ++i) {
      const Address info = kBinInfos + i * l.bin_info.stride;
      // Whole pages that regions fill exactly; class 3 gets one page with a tail no region fills.
      const std::uint64_t slab = i == kSlabClass ? kPageBytes : std::lcm(sizes[i], kPageBytes);
      const std::uint64_t regions = slab / sizes[i];
      image.put(info + l.bin_info.reg_size, sizes[i]);
      image.put(info + l.bin_info.slab_size, slab);
      image.put(info + l.bin_info.nregs, regions | (std::uint64_t{1} << 32));  // nregs, then n_shards 1
      image.put(info + l.bin_info.nbits, regions);
    }
    // Arena 0, its metadata allocator (one block holding the base_t) and its statistics: class 3 has 4
    // regions out in 1 slab; one 16 KiB allocation; 2 dirty pages, 4 retained.
    image.put(kArenas, kArena);
    image.put(kArena + l.arena.ind, 0);
    image.put(kArena + l.arena.base, kBase);
    image.put(kBase + l.base.ehooks_ind, 0);
    image.put(kBase + l.base.ehooks, kCode + 0x40);
    image.put(kBase + l.base.blocks, kBaseBlock);
    image.put(kBaseBlock + l.base.block_size, 0x2000);
    image.put(kBaseBlock + l.base.block_next, 0);
    const Address bin = kArena + l.arena.bins + kSlabClass * l.arena.bin_stride;
    image.put(bin + l.arena.bin_current_regions, 4);
    image.put(bin + l.arena.bin_current_slabs, 1);
    image.put(kArena + l.arena.large_stats + l.arena.large_stats_allocations, 3);
    image.put(kArena + l.arena.large_stats + l.arena.large_stats_frees, 2);
    image.put(kArena + l.arena.dirty_pages, 2);
    image.put(kArena + l.arena.retained_pages, 4);

    // The extents. The slab: regions 0, 1, 2 and 4 out (bitmap bits clear), the rest free.
    put_extent(edata(0), kHeap, kPageBytes, true, ExtentState::active, kSlabClass, kRegions - 4);
    std::uint64_t bitmap[kSlabBitmapWords] = {};
    for (std::uint32_t i = 0; i < kRegions; ++i)
      if (i != 0 && i != 1 && i != 2 && i != 4) bitmap[i / 64] |= std::uint64_t{1} << (i % 64);
    for (std::size_t w = 0; w < kSlabBitmapWords; ++w) image.put(edata(0) + l.edata.slab_bitmap + 8 * w, bitmap[w]);
    put_extent(edata(1), kLargeUser, 5 * kPageBytes, false, ExtentState::active, kLargeClass, 0);
    put_extent(edata(2), kDirty, 2 * kPageBytes, false, ExtentState::dirty, 0, 0);
    put_extent(edata(3), kRetained, 4 * kPageBytes, false, ExtentState::retained, 0, 0);
    image.put(kEmap + l.rtree.base, kBase);
    image.put(kEmap + l.rtree.root + 8 * ((kHeap >> kPageShift) >> RtreeLayout::kLeafBits), kLeaf);
    map_page(kHeap, edata(0), true, ExtentState::active, kSlabClass);
    map_page(kLarge, edata(1), false, ExtentState::active, kLargeClass);
    map_page(kLarge + 4 * kPageBytes, edata(1), false, ExtentState::active, kLargeClass);
    map_page(kDirty, edata(2), false, ExtentState::dirty, 0);
    map_page(kDirty + kPageBytes, edata(2), false, ExtentState::dirty, 0);
    map_page(kRetained, edata(3), false, ExtentState::retained, 0);
    map_page(kRetained + 3 * kPageBytes, edata(3), false, ExtentState::retained, 0);

    // One thread cache, listed by arena 0: class 3's stack lies in region 2 and holds region 1.
    image.put(kArena + l.arena.cache_bin_descriptors, kTcache);
    image.put(kTcache + l.cache_bin.descriptor_next, kTcache);
    image.put(kTcache + l.cache_bin.descriptor_bins, kBins);
    put_stack(kSlabClass, region(2), 2, {region(1)});

    rt.layout = &l;
    rt.version = "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c";
    std::string error;
    REQUIRE(find_globals(image, module(), writable(), placed_right(), rt, &error));
  }

  void put_extent(Address at, Address address, std::uint64_t size, bool slab, ExtentState state,
                  std::uint32_t szind, std::uint32_t nfree) {
    using E = EdataLayout;
    const Layout& l = layout_5_3();
    image.put(at + l.edata.bits, (std::uint64_t{slab} << E::kSlabShift) |
                                     (std::uint64_t{static_cast<unsigned>(state)} << E::kStateShift) |
                                     (std::uint64_t{szind} << E::kSzindShift) |
                                     (std::uint64_t{nfree} << E::kNfreeShift));
    image.put(at + l.edata.addr, address);
    image.put(at + l.edata.size_esn, size | 7);  // a serial number in the low bits
  }
  void map_page(Address page, Address e, bool slab, ExtentState state, std::uint32_t szind) {
    const std::uint64_t index = (page >> kPageShift) & ((std::uint64_t{1} << RtreeLayout::kLeafBits) - 1);
    image.put(kLeaf + 8 * index, (std::uint64_t{szind} << kVaddrBits) | e |
                                     (std::uint64_t{static_cast<unsigned>(state)} << RtreeLayout::kLeafStateShift) |
                                     std::uint64_t{slab});
  }
  // Cache bin `bin`'s stack: room for `capacity` pointers from `at`, holding `items` at its top.
  void put_stack(std::size_t bin, Address at, std::uint64_t capacity, std::vector<Address> items) {
    const CacheBinLayout& c = layout_5_3().cache_bin;
    const Address empty = at + 8 * capacity;
    const Address head = empty - 8 * items.size();
    for (std::size_t i = 0; i < items.size(); ++i) image.put(head + 8 * i, items[i]);
    const Address b = kBins + bin * c.stride;
    image.put(b + c.stack_head, head);
    image.put(b + c.low_bits_full - 2, (static_cast<std::uint64_t>(at & 0xffff) << 16) |
                                           (static_cast<std::uint64_t>(empty & 0xffff) << 32));
  }
  static Placements placed_right() {
    return {{kSizeTable, "known-build"}, {kBinInfos, "known-build"}, {kArenas, "known-build"}, {kEmap, "known-build"}};
  }
  static WritableRanges writable() { return {{kGlobals, kGlobals + kGlobalsBytes}}; }
  const Module& module() const { return image.modules().front(); }
};

const Block* block_at(const HeapModel& m, Address a) {
  const Block* b = m.block_containing(a);
  return b && b->address() == a ? b : nullptr;
}

bool has_warning(const HeapModel& m, const std::string& text) {
  return std::any_of(m.warnings.begin(), m.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("jemalloc: the located structures are checked") {
  JeHeap h;
  const Layout& l = layout_5_3();
  CHECK(read_size_table(h.image, kSizeTable));
  CHECK_FALSE(read_size_table(h.image, kSizeTable + 8));  // starts 16, not 8
  CHECK(read_bin_infos(h.image, l, kBinInfos, h.rt.sizes));
  CHECK_FALSE(read_bin_infos(h.image, l, kBinInfos + l.bin_info.stride, h.rt.sizes));  // class 1's sizes
  CHECK(is_arena(h.image, l, kArena, 0));
  CHECK_FALSE(is_arena(h.image, l, kArena, 1));  // arena 0 is not arena 1
  CHECK_FALSE(is_arena(h.image, l, kArena + 8, 0));
  CHECK(is_emap(h.image, l, kEmap, kBase));
  CHECK_FALSE(is_emap(h.image, l, kEmap, kBase + 8));  // drawing from another metadata allocator
  h.image.put(kLeaf + 8 * ((kHeap >> kPageShift) & ((1u << RtreeLayout::kLeafBits) - 1)), edata(2) | 1);
  CHECK_FALSE(is_emap(h.image, l, kEmap, kBase));  // its first entry's extent does not cover its page
}

TEST_CASE("jemalloc: the extent map becomes regions, a large block and free pages, each in its state") {
  JeHeap h;
  const HeapModel m = walk_heap(h.image, h.rt);
  INFO(fmt::format("{}", fmt::join(m.warnings, "\n")));
  CHECK(m.complete);
  CHECK(m.warnings.empty());
  CHECK(m.allocator == "jemalloc");
  CHECK(m.version == "5.3.0");
  // 85 regions less region 2 (the thread cache's stacks: metadata, not a block), the large block, the
  // dirty pages; the retained pages have no memory, so no block.
  REQUIRE(m.blocks.size() == kRegions - 1 + 2);
  CHECK(block_at(m, region(0))->state == BlockState::in_use);
  CHECK(block_at(m, region(1))->state == BlockState::tcache);
  CHECK_FALSE(m.block_containing(region(2)));
  CHECK(block_at(m, region(3))->state == BlockState::free);
  CHECK(block_at(m, region(4))->state == BlockState::in_use);
  CHECK(block_at(m, region(84))->state == BlockState::free);
  const Block* large = block_at(m, kLargeUser);
  REQUIRE(large);
  CHECK(large->state == BlockState::in_use);
  CHECK(large->usable_size() == 16384);
  const Block* dirty = block_at(m, kDirty);
  REQUIRE(dirty);
  CHECK((dirty->state == BlockState::free && dirty->chunk_size() == 2 * kPageBytes));
  CHECK_FALSE(m.block_containing(kRetained));

  REQUIRE(m.arenas.size() == 1);
  const ArenaInfo& arena = m.arenas.front();
  CHECK(arena.address == kArena);
  CHECK(arena.is_main);
  CHECK(arena.heaps.size() == 1);
  CHECK(arena.system_bytes == 8 * kPageBytes);
  // Slab tail, the stacks' region and the large extent's pages beyond its block.
  CHECK(arena.overhead_bytes == (kPageBytes - kRegions * kRegion) + kRegion + (5 * kPageBytes - 16384));
  std::uint64_t states = 0;
  for (const StateTotal& t : arena.totals) states += t.bytes;
  CHECK(states + arena.overhead_bytes == arena.system_bytes);
  const auto in_metadata = [&](Address a) {
    return std::any_of(m.metadata.begin(), m.metadata.end(), [&](const HeapSegment& s) { return s.start <= a && a < s.end; });
  };
  CHECK(in_metadata(kBase));
  CHECK(in_metadata(region(2)));

  // For fragmentation: class 3's one slab (the stacks' region counts as handed out), and the free pages.
  REQUIRE(m.size_classes.size() == 1);
  const SizeClassUse& use = m.size_classes.front();
  CHECK((use.object_bytes == kRegion && use.slabs == 1 && use.slab_bytes == kPageBytes));
  CHECK((use.in_use == 3 && use.cached == 1 && use.free == kRegions - 4));
  REQUIRE(m.free_pages.size() == 3);
  CHECK((m.free_pages[0].kind == "dirty" && m.free_pages[0].runs == 1 && m.free_pages[0].bytes == 2 * kPageBytes));
  CHECK((m.free_pages[2].kind == "retained" && m.free_pages[2].bytes == 4 * kPageBytes));
}

TEST_CASE("jemalloc: its own counters are the walk's counts") {
  JeHeap h;
  const HeapModel m = walk_heap(h.image, h.rt);
  REQUIRE(m.figures.size() == 5);
  for (const AllocatorFigure& f : m.figures) {
    INFO(f.name);
    REQUIRE(f.own);
    REQUIRE(f.walk);
    CHECK(*f.own == *f.walk);
  }
  CHECK(*m.figures.front().own == 4 * kRegion + 16384);  // stats.allocated
  SECTION("a counter that moved is shown, not hidden") {
    h.image.put(kArena + layout_5_3().arena.dirty_pages, 3);
    const HeapModel moved = walk_heap(h.image, h.rt);
    CHECK(*moved.figures[2].own == 3 * kPageBytes);
    CHECK(*moved.figures[2].walk == 2 * kPageBytes);
  }
}

TEST_CASE("jemalloc: damaged extents, caches and arenas give warnings and a partial model, not a hang") {
  const Layout& l = layout_5_3();
  SECTION("an extent that does not cover the page that names it") {
    JeHeap h;
    h.image.put(edata(1) + l.edata.addr, kHeap + 20 * kPageBytes);
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(has_warning(m, "does not cover it"));
    CHECK_FALSE(m.block_containing(kLargeUser));
    CHECK(block_at(m, region(0)));  // the rest is still walked
  }
  SECTION("a slab whose size is not its class's") {
    JeHeap h;
    h.image.put(edata(0) + l.edata.size_esn, 2 * kPageBytes);
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(has_warning(m, "names size class 3 but has 8192 bytes"));
  }
  SECTION("a slab whose free count disagrees with its bitmap is walked by its bitmap, with a warning") {
    JeHeap h;
    h.put_extent(edata(0), kHeap, kPageBytes, true, ExtentState::active, kSlabClass, 7);
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK(has_warning(m, "81 regions free by its bitmap, 7 by its count"));
    CHECK(block_at(m, region(3))->state == BlockState::free);
  }
  SECTION("a thread cache list that loops through a second descriptor, a bad stack, and a stray pointer") {
    JeHeap h;
    h.image.put(kTcache + l.cache_bin.descriptor_next, kTcache + 0x800);
    h.image.put(kTcache + 0x800 + l.cache_bin.descriptor_next, kTcache + 0x800);  // never back to the head
    h.image.put(kTcache + 0x800 + l.cache_bin.descriptor_bins, kBins);  // the same bins again
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK(has_warning(m, "cached twice"));
    CHECK(block_at(m, region(1))->state == BlockState::tcache);
  }
  SECTION("a cache bin whose stack span is odd, and one that holds a pointer to no block") {
    JeHeap h;
    h.image.put(kBins + 5 * l.cache_bin.stride + l.cache_bin.stack_head, region(40) + 3);
    h.image.put(kBins + 5 * l.cache_bin.stride + l.cache_bin.low_bits_full - 2,
                static_cast<std::uint64_t>((region(40) + 16) & 0xffff) << 32);
    h.put_stack(kSlabClass, region(2), 2, {region(1), kHeap + 0x100000});
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(has_warning(m, "has a bad stack"));
    CHECK(has_warning(m, "1 cached pointer in thread caches is no allocated region"));
  }
  SECTION("an arena that does not name itself, and an unreadable leaf") {
    JeHeap h;
    h.image.put(kArenas + 8, 0x1000);
    h.image.put(kEmap + l.rtree.root, 0xdead0000);  // a leaf for pages 0..2^18: not in the image
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(has_warning(m, "arena 1 (0x1000) does not look like an arena"));
    CHECK(has_warning(m, "leaf 0xdead0000 cannot be read"));
    CHECK(block_at(m, region(0)));
  }
}

TEST_CASE("jemalloc: globals are taken at their placements when they check out, else found by a scan") {
  auto methods = [](const Runtime& rt) {
    std::vector<std::string> out;
    for (const Discovery& d : rt.discovery) out.push_back(d.structure + ": " + d.method);
    return out;
  };
  JeHeap h;
  Runtime rt;
  rt.layout = &layout_5_3();
  std::string error;
  SECTION("right placements") {
    REQUIRE(find_globals(h.image, h.module(), JeHeap::writable(), JeHeap::placed_right(), rt, &error));
    CHECK(methods(rt) == std::vector<std::string>{"sz_index2size_tab: known-build, checked",
                                                  "bin_infos: known-build, checked", "arenas: known-build, checked",
                                                  "arena_emap_global: known-build, checked"});
  }
  SECTION("wrong placements, or none: the scan finds the same structures") {
    const Placements wrong{{kSizeTable + 8, "symbol"}, {}, {kArenas + 8, "symbol"}, {kEmap + 64, "symbol"}};
    REQUIRE(find_globals(h.image, h.module(), JeHeap::writable(), wrong, rt, &error));
    CHECK(methods(rt) == std::vector<std::string>{"sz_index2size_tab: scan, checked", "bin_infos: scan, checked",
                                                  "arenas: scan, checked", "arena_emap_global: scan, checked"});
    CHECK((rt.arenas == kArenas && rt.emap == kEmap && rt.sizes == h.rt.sizes));
    CHECK(rt.warnings.size() == 3);  // each wrong placement is named
  }
  SECTION("a scan passes over another word pointing at arena 0 (jemalloc's a0) by the slots after it") {
    h.image.put(kGlobals + 0x1800, kArena);
    h.image.put(kGlobals + 0x1808, 9);  // a count, not arena 1
    const Placements none{{kSizeTable, "symbol"}, {kBinInfos, "symbol"}, {}, {kEmap, "symbol"}};
    REQUIRE(find_globals(h.image, h.module(), JeHeap::writable(), none, rt, &error));
    CHECK(rt.arenas == kArenas);
  }
  SECTION("a damaged slot after arena 0 at the placement is the walk's warning, not a lost heap") {
    h.image.put(kArenas + 16, 0x1000);
    REQUIRE(find_globals(h.image, h.module(), JeHeap::writable(), JeHeap::placed_right(), rt, &error));
    CHECK(rt.arenas == kArenas);
  }
  SECTION("a radix tree found nowhere is an error, not a guess") {
    h.image.put(kEmap + layout_5_3().rtree.root + 8 * ((kHeap >> kPageShift) >> RtreeLayout::kLeafBits), 0);
    CHECK_FALSE(find_globals(h.image, h.module(), JeHeap::writable(), JeHeap::placed_right(), rt, &error));
    CHECK(error.find("cannot find jemalloc's extent map") != std::string::npos);
  }
  SECTION("before the first allocation the heap is empty") {
    FakeImage empty;
    empty.add_region(kGlobals, kGlobalsBytes);
    REQUIRE(find_globals(empty, h.module(), JeHeap::writable(), JeHeap::placed_right(), rt, &error));
    CHECK_FALSE(rt.initialized);
    const HeapModel m = walk_heap(empty, rt);
    CHECK(m.blocks.empty());
    CHECK(has_warning(m, "not initialised yet"));
  }
}

TEST_CASE("jemalloc: the release comes from the library's version string, the placement from its build-id") {
  CHECK(known_build("1d5163c246dc9cd2b4d339f2ac42efd95c6e0ae1"));
  CHECK_FALSE(known_build(""));
  const std::string path = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
  if (access(path.c_str(), R_OK) != 0) {
    WARN(path << " is not installed (scripts/install-deps): not checked");
    return;
  }
  SymbolSearchOptions options;
  options.use_debug_files = false;
  options.use_debuginfod = false;
  std::string error;
  const auto symbols = ModuleSymbols::load(path, options, &error);
  REQUIRE(symbols);
  CHECK(detect_release(*symbols) == "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c");
  // The library Debian 12 installs is the build whose placement is known, and it is stripped of the
  // globals' symbols (which is why the placement is needed).
  CHECK(known_build(symbols->build_id()));
  CHECK_FALSE(symbols->find("je_arena_emap_global"));
  CHECK(symbols->find("mallctl"));
}

TEST_CASE("jemalloc: verify reports the walk's checks as findings") {
  JeHeap h;
  SECTION("a sound heap has none, and says what was checked") {
    const HeapVerification v = verify_heap(h.image, h.rt);
    CHECK(v.findings.empty());
    CHECK((v.checked.arenas == 1 && v.checked.tcaches == 1 && v.checked.tcache_entries == 1));
    CHECK(v.checked.chunks == kRegions - 1 + 2);
  }
  SECTION("a block cached while free in its slab was freed twice") {
    h.put_stack(kSlabClass, region(2), 2, {region(1), region(3)});
    const HeapVerification v = verify_heap(h.image, h.rt);
    REQUIRE(v.findings.size() == 1);
    CHECK(v.findings[0].kind == "double_free");
    CHECK(v.findings[0].chunk == region(3));
  }
  SECTION("a slab whose free count disagrees with its bitmap") {
    h.put_extent(edata(0), kHeap, kPageBytes, true, ExtentState::active, kSlabClass, 7);
    const HeapVerification v = verify_heap(h.image, h.rt);
    REQUIRE(v.findings.size() == 1);
    CHECK(v.findings[0].kind == "slab_count");
    CHECK(v.findings[0].chunk == edata(0));
  }
}
