// The tcmalloc walker (runtime/tcmalloc) on a hand-made gperftools 2.10 heap in a fake image: a size map,
// central free lists with a transfer cache, a page heap whose page map holds a small-object span, a large
// span, a free span and a stale entry, and one thread cache. The checks of the located structures accept
// it and reject look-alikes; the walk gives each object its state; damaged lists and spans give warnings
// and a partial model, never a hang.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>

#include "fake_image.h"
#include "runtime/tcmalloc/tcmalloc_heap.h"
#include "runtime/tcmalloc/tcmalloc_runtime.h"
#include "symbols/module_symbols.h"

using namespace heapscope;
using namespace heapscope::tcmalloc;
using heapscope::testing::FakeImage;

namespace {

constexpr Address kStatics = 0x7f0000000000;  // sizemap_, central_cache_, pageheap_ (2 MiB of .bss)
constexpr Address kSizeMap = kStatics;
constexpr Address kCentral = kStatics + 0x2000;
constexpr Address kPageHeap = kStatics + 0x10000;
constexpr Address kCode = 0x7f0000400000;       // the library's code (the page map allocator)
constexpr Address kThreadHeaps = 0x7f0000500000;  // ThreadCache::thread_heaps_
constexpr Address kLeaf = 0x7f0001000000;
constexpr Address kSpans = 0x7f0002000000;
constexpr Address kThreadCache = 0x7f0003000000;
constexpr Address kHeap = 0x555555600000;
constexpr std::uint64_t kFirstPage = kHeap >> kPageShift;

constexpr std::uint32_t kObjectSize = 48;  // class 2: 170 objects in a page, 32 bytes left over
constexpr std::uint64_t kObjects = kPageBytes / kObjectSize;

Address object(std::uint64_t i) { return kHeap + i * kObjectSize; }
Address span(int i) { return kSpans + 64 * i; }

struct TcHeap {
  FakeImage image;
  Runtime rt;

  TcHeap() {
    const Layout& l = layout_2_10();
    image.add_region(kStatics, 0x200000);
    image.add_code(kCode, 0x1000, "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4");
    image.add_region(kThreadHeaps, 0x1000);
    image.add_region(kLeaf, std::size_t{8} << PageHeapLayout::kLeafBits);
    image.add_region(kSpans, 0x1000);
    image.add_region(kThreadCache, 0x2000);
    image.add_region(kHeap, 8 * kPageBytes);

    // Size map: class 1 of 8-byte objects, class 2 of 48-byte ones, one page per span, chains of 2.
    image.put(kSizeMap + l.sizemap.num_size_classes, 3);
    const std::uint32_t sizes[] = {0, 8, kObjectSize};
    for (int c = 0; c < 3; ++c) {
      put32(kSizeMap + l.sizemap.class_to_size + 4 * c, sizes[c]);
      image.put(kSizeMap + l.sizemap.class_to_pages + 8 * c, c ? 1 : 0);
      put32(kSizeMap + l.sizemap.num_objects_to_move + 4 * c, c ? 2 : 0);
    }
    // Central free lists: their class, empty span lists; class 2's transfer cache holds objects 7 → 8.
    for (int c = 0; c < 3; ++c) {
      const Address list = kCentral + c * l.central.stride;
      image.put(list + l.central.size_class, c);
      self_linked(list + l.central.empty);
      self_linked(list + l.central.nonempty);
    }
    const Address list2 = kCentral + 2 * l.central.stride;
    put32(list2 + l.central.used_slots, 1);
    image.put(list2 + l.central.tc_slots, object(7));
    image.put(list2 + l.central.tc_slots + 8, object(8));
    image.put(object(7), object(8));
    image.put(object(8), 0);
    // Page heap: its map allocator in the library's code, its free span lists empty.
    image.put(kPageHeap + l.pageheap.pagemap_allocator, kCode + 0x10);
    for (std::uint64_t k = 0; k < kMaxSmallSpanPages; ++k) {
      self_linked(kPageHeap + l.pageheap.free_lists + k * l.pageheap.free_list_stride);
      self_linked(kPageHeap + l.pageheap.free_lists + k * l.pageheap.free_list_stride + l.span.size);
    }
    image.put(kPageHeap + l.pageheap.stats, 6 * kPageBytes);
    image.put(kPageHeap + l.pageheap.pagemap_root + 8 * (kFirstPage >> PageHeapLayout::kLeafBits), kLeaf);
    // Spans: a page of class 2 whose free list is objects 3 → 5; a 3-page large allocation; a 2-page free
    // run. The page map names each span at its first and last page, and holds a stale entry in between.
    put_span(span(0), kFirstPage, 1, 2, SpanLayout::kInUse, object(3));
    image.put(object(3), object(5));
    image.put(object(5), 0);
    put_span(span(1), kFirstPage + 1, 3, 0, SpanLayout::kInUse, 0);
    put_span(span(2), kFirstPage + 4, 2, 0, SpanLayout::kOnNormalFreeList, 0);
    put_span(span(3), 0x1234, 9, 0, SpanLayout::kInUse, 0);  // a Span since reused elsewhere
    map_page(kFirstPage, span(0));
    map_page(kFirstPage + 1, span(1));
    map_page(kFirstPage + 2, span(3));
    map_page(kFirstPage + 3, span(1));
    map_page(kFirstPage + 4, span(2));
    map_page(kFirstPage + 5, span(2));
    // One thread cache: class 2 holds object 10; its lists know their classes' sizes.
    image.put(kThreadHeaps, kThreadCache);
    for (int c = 1; c < 3; ++c) put32(kThreadCache + c * l.thread_cache.free_list_stride + l.thread_cache.list_object_size, sizes[c]);
    const Address tl2 = kThreadCache + 2 * l.thread_cache.free_list_stride;
    image.put(tl2, object(10));
    put32(tl2 + l.thread_cache.list_length, 1);
    image.put(object(10), 0);

    rt.layout = &l;
    rt.version = "2.10";
    rt.inited = true;
    rt.sizemap = kSizeMap;
    rt.central_cache = kCentral;
    rt.pageheap = kPageHeap;
    rt.thread_heaps = kThreadHeaps;
    rt.classes = *read_size_classes(image, l, kSizeMap);
  }

  void put32(Address at, std::uint32_t v) {
    const std::uint64_t word = image.read_u64(at & ~Address{7}).value_or(0);
    const unsigned shift = (at & 7) * 8;
    image.put(at & ~Address{7}, (word & ~(std::uint64_t{0xffffffff} << shift)) | (std::uint64_t{v} << shift));
  }
  void self_linked(Address head) {
    image.put(head + layout_2_10().span.next, head);
    image.put(head + layout_2_10().span.prev, head);
  }
  void put_span(Address at, std::uint64_t start, std::uint64_t length, std::uint32_t size_class, unsigned location,
                Address objects) {
    const SpanLayout& s = layout_2_10().span;
    image.put(at + s.start, start);
    image.put(at + s.length, length);
    image.put(at + s.objects, objects);
    image.put(at + s.bits, (std::uint64_t{size_class} << SpanLayout::kSizeClassShift) |
                               (std::uint64_t{location} << SpanLayout::kLocationShift));
  }
  void map_page(std::uint64_t page, Address s) {
    image.put(kLeaf + 8 * (page & ((std::uint64_t{1} << PageHeapLayout::kLeafBits) - 1)), s);
  }
  const Module& module() const { return image.modules().front(); }
};

const Block* block_at(const HeapModel& m, Address a) {
  const Block* b = m.block_containing(a);
  return b && b->address() == a ? b : nullptr;
}

}  // namespace

TEST_CASE("tcmalloc: the located structures are checked") {
  TcHeap h;
  const Layout& l = layout_2_10();
  REQUIRE(h.rt.classes.size() == 3);
  CHECK(h.rt.classes[2].size == kObjectSize);
  CHECK(h.rt.classes[2].pages == 1);
  CHECK(is_central_cache(h.image, l, kCentral, 3));
  CHECK(is_pageheap(h.image, l, kPageHeap, h.module()));
  // Look-alikes one word off, or with a damaged field, are rejected.
  CHECK_FALSE(read_size_classes(h.image, l, kSizeMap + 8));
  CHECK_FALSE(is_central_cache(h.image, l, kCentral + 8, 3));
  CHECK_FALSE(is_pageheap(h.image, l, kPageHeap + 8, h.module()));
  h.put32(kSizeMap + l.sizemap.class_to_size + 8, 4);  // class 2 smaller than class 1
  CHECK_FALSE(read_size_classes(h.image, l, kSizeMap));
  h.image.put(kCentral + l.central.stride + l.central.size_class, 7);
  CHECK_FALSE(is_central_cache(h.image, l, kCentral, 3));
  h.image.put(kPageHeap + l.pageheap.pagemap_allocator, 0x1000);  // not the library's code
  CHECK_FALSE(is_pageheap(h.image, l, kPageHeap, h.module()));
}

TEST_CASE("tcmalloc: spans become objects, large blocks and free runs, each object in its state") {
  TcHeap h;
  const Layout& l = layout_2_10();
  const HeapModel m = walk_heap(h.image, h.rt);
  INFO(fmt::format("{}", fmt::join(m.warnings, "\n")));
  CHECK(m.complete);
  CHECK(m.warnings.empty());
  CHECK(m.allocator == "tcmalloc");
  REQUIRE(m.blocks.size() == kObjects + 2);
  REQUIRE(std::is_sorted(m.blocks.begin(), m.blocks.end(),
                         [](const Block& a, const Block& b) { return a.chunk < b.chunk; }));
  for (const Block& b : m.blocks) CHECK(b.layout == BlockLayout::bare);

  CHECK(block_at(m, object(0))->state == BlockState::in_use);
  CHECK(block_at(m, object(0))->usable_size() == kObjectSize);
  CHECK(block_at(m, object(3))->state == BlockState::free);    // the span's free list
  CHECK(block_at(m, object(5))->state == BlockState::free);
  CHECK(block_at(m, object(7))->state == BlockState::tcache);  // the transfer cache
  CHECK(block_at(m, object(8))->state == BlockState::tcache);
  CHECK(block_at(m, object(10))->state == BlockState::tcache);  // the thread cache
  const Block* large = block_at(m, kHeap + kPageBytes);
  REQUIRE(large);
  CHECK(large->state == BlockState::in_use);
  CHECK(large->chunk_size() == 3 * kPageBytes);  // the stale entry inside it was passed over
  const Block* run = block_at(m, kHeap + 4 * kPageBytes);
  REQUIRE(run);
  CHECK(run->state == BlockState::free);
  CHECK(run->chunk_size() == 2 * kPageBytes);

  REQUIRE(m.arenas.size() == 1);
  const ArenaInfo& a = m.arenas[0];
  REQUIRE(a.heaps.size() == 1);  // contiguous spans make one segment
  CHECK(a.heaps[0].start == kHeap);
  CHECK(a.heaps[0].end == kHeap + 6 * kPageBytes);
  CHECK(a.system_bytes == 6 * kPageBytes);
  CHECK(a.overhead_bytes == kPageBytes - kObjects * kObjectSize);
  const auto& t = a.totals;
  CHECK(t[static_cast<int>(BlockState::in_use)].blocks == kObjects - 5 + 1);
  CHECK(t[static_cast<int>(BlockState::in_use)].bytes == (kObjects - 5) * kObjectSize + 3 * kPageBytes);
  CHECK(t[static_cast<int>(BlockState::tcache)].blocks == 3);
  CHECK(t[static_cast<int>(BlockState::free)].bytes == 2 * kObjectSize + 2 * kPageBytes);
  // The page map leaf and the thread cache are the allocator's own memory: not roots, not "outside malloc".
  const std::vector<HeapSegment> metadata{{kLeaf, kLeaf + (std::uint64_t{8} << PageHeapLayout::kLeafBits)},
                                          {kThreadCache, kThreadCache + l.thread_cache.object_bytes}};
  REQUIRE(m.metadata.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(m.metadata[i].start == metadata[i].start);
    CHECK(m.metadata[i].end == metadata[i].end);
  }
  std::uint64_t sum = a.overhead_bytes;
  for (const StateTotal& s : t) sum += s.bytes;
  CHECK(sum == a.system_bytes);
}

TEST_CASE("tcmalloc: damaged lists and spans give warnings and a partial model, not a hang") {
  const Layout& l = layout_2_10();
  auto has_warning = [](const HeapModel& m, const std::string& text) {
    return std::any_of(m.warnings.begin(), m.warnings.end(),
                       [&](const std::string& w) { return w.find(text) != std::string::npos; });
  };
  SECTION("a span's free list that loops") {
    TcHeap h;
    h.image.put(object(5), object(3));
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(has_warning(m, "free list loops"));
    CHECK(m.blocks.size() == kObjects + 2);
  }
  SECTION("a span's free list leaving the span") {
    TcHeap h;
    h.image.put(object(5), kHeap + 5 * kPageBytes);
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(has_warning(m, "not one of its objects"));
  }
  SECTION("a thread cache list shorter than its count, and a thread cache list that loops") {
    TcHeap h;
    h.put32(kThreadCache + 2 * l.thread_cache.free_list_stride + l.thread_cache.list_length, 5);
    h.image.put(kThreadCache + l.thread_cache.next, kThreadCache);  // the cache list loops too
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(has_warning(m, "its list ends after 1 of 5 objects"));
    CHECK(has_warning(m, "thread cache list loops"));
    CHECK(block_at(m, object(10))->state == BlockState::tcache);
  }
  SECTION("a span with an impossible length, and an unreadable page map leaf") {
    TcHeap h;
    h.image.put(span(1) + l.span.length, std::uint64_t{1} << 40);
    h.image.put(kPageHeap + l.pageheap.pagemap_root, 0xdead0000);  // leaf of pages 0..2^18: not in the image
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(has_warning(m, "bad length"));
    CHECK(has_warning(m, "cannot be read"));
    CHECK(block_at(m, object(0)));  // the rest is still walked
    CHECK(block_at(m, kHeap + 4 * kPageBytes));
  }
  SECTION("a damaged central free list: its transfer cache is not read") {
    TcHeap h;
    h.image.put(kCentral + 2 * l.central.stride + l.central.size_class, 5);
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(has_warning(m, "central free list of size class 2"));
    CHECK(block_at(m, object(7))->state == BlockState::in_use);
    CHECK(block_at(m, object(10))->state == BlockState::tcache);  // the thread cache is still read
  }
  SECTION("a thread cache whose lists do not know their sizes is not taken for one") {
    TcHeap h;
    h.put32(kThreadCache + 1 * l.thread_cache.free_list_stride + l.thread_cache.list_object_size, 16);
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(has_warning(m, "does not look like a thread cache"));
    CHECK(block_at(m, object(10))->state == BlockState::in_use);
  }
}

TEST_CASE("tcmalloc: the release comes from the library's version string, the placement from its build-id") {
  const std::optional<KnownBuild> debian = known_build("39dfd4a5855703fa6c2469749282f75b18a1aa66");
  REQUIRE(debian);
  // sizemap_ ends where pageheap_lock_ starts; the others lie further down.
  CHECK(debian->sizemap == -static_cast<std::int64_t>(layout_2_10().sizemap.size));
  CHECK(debian->pageheap < debian->central_cache);
  CHECK_FALSE(known_build(""));
  CHECK_FALSE(known_build("0000000000000000000000000000000000000000"));

  const std::string path = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4";
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
  CHECK(detect_release(*symbols) == std::string(kKnownRelease));
  // The library Debian 12 installs is the build whose placement is known.
  CHECK(known_build(symbols->build_id()));
  CHECK(symbols->find(kPageheapLockSymbol));
  CHECK(symbols->find(kThreadHeapsSymbol));
}

TEST_CASE("tcmalloc: statics are placed from pageheap_lock_ and checked, else found by their signatures") {
  TcHeap h;
  const Address lock = kStatics + 0x1f0000;
  const WritableRanges writable{{kStatics, kStatics + 0x200000}};
  auto methods = [](const Runtime& rt) {
    std::vector<std::string> out;
    for (const Discovery& d : rt.discovery) out.push_back(d.structure + ": " + d.method);
    return out;
  };
  Runtime rt;
  rt.layout = &layout_2_10();
  std::string error;
  const auto offset = [&](Address a) { return static_cast<std::int64_t>(a) - static_cast<std::int64_t>(lock); };

  SECTION("a placement that checks out is taken") {
    const KnownBuild right{"", "", offset(kSizeMap), offset(kCentral), offset(kPageHeap)};
    REQUIRE(place_statics(h.image, h.module(), writable, lock, right, "known-build", rt, &error));
    CHECK(methods(rt) == std::vector<std::string>{"sizemap_: known-build, size classes checked",
                                                  "central_cache_: known-build, each list's size class checked",
                                                  "pageheap_: known-build, free span lists checked"});
  }
  SECTION("a placement that does not is replaced by a scan of the library's writable data") {
    const KnownBuild wrong{"", "", offset(kSizeMap) + 8, offset(kCentral) - 64, offset(kPageHeap) + 4096};
    INFO(error);
    REQUIRE(place_statics(h.image, h.module(), writable, lock, wrong, "2.10-placement", rt, &error));
    CHECK(methods(rt) == std::vector<std::string>{"sizemap_: scan, size classes checked",
                                                  "central_cache_: scan, each list's size class checked",
                                                  "pageheap_: scan, free span lists checked"});
  }
  SECTION("nothing that checks out anywhere is an error, not a guess") {
    const KnownBuild wrong{"", "", offset(kSizeMap) + 8, offset(kCentral), offset(kPageHeap)};
    CHECK_FALSE(place_statics(h.image, h.module(), {}, lock, wrong, "2.10-placement", rt, &error));
    CHECK(error.find("size map") != std::string::npos);
    h.image.put(kPageHeap + layout_2_10().pageheap.pagemap_allocator, 0);
    Runtime again;
    again.layout = &layout_2_10();
    const KnownBuild right{"", "", offset(kSizeMap), offset(kCentral), offset(kPageHeap)};
    CHECK_FALSE(place_statics(h.image, h.module(), writable, lock, right, "known-build", again, &error));
    CHECK(error.find("page heap") != std::string::npos);
  }
  if (!rt.discovery.empty()) {
    CHECK(rt.sizemap == kSizeMap);
    CHECK(rt.central_cache == kCentral);
    CHECK(rt.pageheap == kPageHeap);
    CHECK(rt.classes.size() == 3);
  }
}
