// The mimalloc walker (runtime/mimalloc) on a hand-made mimalloc 2.0.9 heap in a fake image: one segment
// whose header slice is followed by a page of 64-byte blocks — some on its free list, its local-free and
// thread-free lists and its heap's thread-delayed list, the rest in use or not yet handed out — and a free
// span; the main heap, its thread data and _mi_stats_main in the library's data. The walk gives each block
// its state and its figures equal mimalloc's statistics; look-alike headers and statistics are rejected;
// damage gives findings and a partial model, never a hang.
#include <catch2/catch.hpp>

#include <algorithm>

#include "fake_image.h"
#include "runtime/mimalloc/mimalloc_heap.h"
#include "runtime/mimalloc/mimalloc_runtime.h"
#include "symbols/symbol_index.h"

using namespace heapscope;
using namespace heapscope::mimalloc;
using heapscope::testing::FakeImage;

namespace {

constexpr Address kLibrary = 0x7f0000000000;  // the library's data
constexpr Address kHeap = kLibrary + 0x100;   // _mi_heap_main
constexpr Address kTld = kLibrary + 0x1000;   // tld_main
constexpr Address kStats = kLibrary + 0x2000;  // _mi_stats_main
constexpr Address kSegment = 0x20000000000;    // 32 MiB aligned
constexpr Address kThread = 0x7fff12340000;
constexpr std::uint64_t kCookie = 0x5eed5eed5eed5eedull;
constexpr std::uint64_t kBlock = 64;
constexpr std::uint64_t kCapacity = 10, kReserved = 1018;  // (64 KiB - 384) / 64
constexpr Address kPage = kSegment + 264 + 80;  // slice 1's mi_page_t
constexpr Address kFirstBlock = kSegment + kSliceBytes + kSmallPageStartOffset;

Address block(std::uint64_t i) { return kFirstBlock + i * kBlock; }

// A slice entry: its words at +0 (slice_count, slice_offset), +8 (capacity, reserved), +24 (used, xblock_size).
void put_slice(FakeImage& image, Address entry, std::uint32_t count, std::uint64_t capacity, std::uint64_t reserved,
               std::uint32_t used, std::uint32_t xblock_size) {
  image.put(entry, count);
  image.put(entry + 8, (capacity << 16) | (reserved << 32));
  image.put(entry + 24, used | (std::uint64_t{xblock_size} << 32));
}

struct Heap {
  FakeImage image;
  Module library;
  Runtime rt;

  Heap() {
    image.add_region(kLibrary, 0x4000, "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0");
    image.add_region(kSegment, 3 * kSliceBytes);
    library.path = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0";
    library.start = kLibrary;
    library.end = kLibrary + 0x4000;
    // The segment's header.
    image.put(kSegment + 208, 1);                  // used: one page
    image.put(kSegment + 216, kSegment ^ kCookie);  // cookie
    image.put(kSegment + 224, kSlicesPerSegment);
    image.put(kSegment + 232, 1);                  // info slices
    image.put(kSegment + 240, 0);                  // kind: normal
    image.put(kSegment + 248, kSlicesPerSegment);  // slice entries
    image.put(kSegment + 256, kThread);
    put_slice(image, kSegment + 264, 1, 0, 0, 0, kSliceBytes);  // the header's own page
    // Slice 1: a page of 64-byte blocks. Free: 3 and 5; local-free: 7; thread-free: 8 (flag 1); thread-delayed:
    // 9; past capacity: 10 on. In use: 0, 1, 2, 4, 6; `used` counts them and the thread-freed and delayed.
    put_slice(image, kPage, 1, kCapacity, kReserved, 7, kBlock);
    image.put(kPage + 16, block(3));
    image.put(block(3), block(5));
    image.put(kPage + 32, block(7));
    image.put(kPage + 40, block(8) | 1);
    image.put(kPage + 48, kHeap);
    // Slices 2-511: one free span.
    put_slice(image, kPage + 80, 510, 0, 0, 0, 0);
    // The main heap and its thread data.
    image.put(kHeap, kTld);
    image.put(kHeap + 2840, block(9));
    image.put(kHeap + 2848, kThread);
    image.put(kHeap + 2864, kCookie);
    image.put(kTld + 16, kHeap);
    // _mi_stats_main: one segment; 32 MiB reserved, 1 MiB committed. tld_main's own statistics: nothing.
    auto count = [&](Address at, std::uint64_t value) {
      image.put(at, value);       // allocated
      image.put(at + 16, value);  // peak
      image.put(at + 24, value);  // current
    };
    count(kStats, 1);
    count(kStats + 64, 32 << 20);
    count(kStats + 96, 1 << 20);

    rt.layout = &layout_2_0_9();
    rt.module = &library;
    rt.version = "2.0.9";
    rt.cookie = kCookie;
    rt.stats_main = kStats;
    std::uint64_t key = 0;
    const auto segment = read_segment_header(image, *rt.layout, kSegment, &key);
    REQUIRE(segment);
    CHECK(key == kCookie);
    rt.segments.push_back(*segment);
  }
};

BlockState state_at(const HeapModel& m, Address at) {
  const Block* b = m.block_containing(at);
  REQUIRE(b);
  REQUIRE(b->chunk == at);
  return b->state;
}

bool has_warning(const HeapModel& m, const std::string& text) {
  return std::any_of(m.warnings.begin(), m.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("mimalloc walk: a page's blocks take their state from its lists and its heap's", "[mimalloc]") {
  Heap h;
  const HeapModel m = walk_heap(h.image, h.rt);
  CHECK(m.complete);
  CHECK(m.warnings.empty());
  REQUIRE(m.blocks.size() == kReserved + 1);  // the page's blocks and the free span
  for (std::uint64_t i : {0, 1, 2, 4, 6}) CHECK(state_at(m, block(i)) == BlockState::in_use);
  for (std::uint64_t i : {3, 5, 10, 1017}) CHECK(state_at(m, block(i)) == BlockState::free);
  for (std::uint64_t i : {7, 8, 9}) CHECK(state_at(m, block(i)) == BlockState::tcache);
  CHECK(m.blocks[0].is_bare());
  CHECK(m.blocks[0].usable_size() == kBlock);
  const Block& span = m.blocks[kReserved];
  CHECK(span.chunk == kSegment + 2 * kSliceBytes);
  CHECK(span.chunk_size() == 510 * kSliceBytes);
  CHECK(span.state == BlockState::free);

  // One thread's arena: the main heap in the library's data; the segment tiles it.
  REQUIRE(m.arenas.size() == 1);
  const ArenaInfo& a = m.arenas.front();
  CHECK(a.is_main);
  CHECK(a.address == kHeap);
  CHECK(a.system_bytes == kSegmentBytes);
  std::uint64_t bytes = a.overhead_bytes;
  for (const StateTotal& t : a.totals) bytes += t.bytes;
  CHECK(bytes == a.system_bytes);
  CHECK(a.overhead_bytes == kSliceBytes + kSmallPageStartOffset);

  // The header slice and the heap's structures are mimalloc's metadata.
  CHECK(std::any_of(m.metadata.begin(), m.metadata.end(),
                    [](const HeapSegment& s) { return s.start == kSegment && s.end == kSegment + kSliceBytes; }));
  CHECK(std::any_of(m.metadata.begin(), m.metadata.end(), [](const HeapSegment& s) { return s.start == kHeap; }));

  // Figures: one segment by the statistics and by the walk, none abandoned.
  REQUIRE(m.figures.size() == 2);
  CHECK(m.figures[0].own == std::optional<std::uint64_t>(1));
  CHECK(m.figures[0].walk == std::optional<std::uint64_t>(1));
  CHECK(m.figures[1].own == std::optional<std::uint64_t>(0));
  CHECK(m.figures[1].walk == std::optional<std::uint64_t>(0));

  // Fragmentation: the page's use, and the free span.
  REQUIRE(m.size_classes.size() == 1);
  CHECK(m.size_classes[0].object_bytes == kBlock);
  CHECK(m.size_classes[0].in_use == 5);
  CHECK(m.size_classes[0].cached == 3);
  CHECK(m.size_classes[0].free == kReserved - 8);
  CHECK(m.free_pages[0].bytes == 510 * kSliceBytes);
  CHECK(m.terms.slab == "page");
}

TEST_CASE("mimalloc verify: a sound heap has no findings, and says what it checked", "[mimalloc]") {
  Heap h;
  const HeapVerification v = verify_heap(h.image, h.rt);
  CHECK(v.findings.empty());
  CHECK(v.checked.heaps == 1);
  CHECK(v.checked.bin_entries == 2);
  CHECK(v.checked.tcache_entries == 3);
  REQUIRE(v.checked_in_own_words.size() == 1);
  CHECK(v.checked_in_own_words[0].find("1 segments of 1 threads") != std::string::npos);
  CHECK_FALSE(v.counts_in_glibc_words);
  CHECK(v.object_word == "block");
}

TEST_CASE("mimalloc walk: damage gives findings and a partial model, never a hang", "[mimalloc]") {
  Heap h;
  SECTION("a free list that loops") {
    h.image.put(block(5), block(3));
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(has_warning(m, "free list of page"));
    const HeapVerification v = verify_heap(h.image, h.rt);
    REQUIRE(v.findings.size() == 1);
    CHECK(v.findings[0].kind == "free_list");
    CHECK(v.findings[0].chunk == block(3));
  }
  SECTION("a local-free list leading out of its page") {
    h.image.put(block(7), 0x1000);
    const HeapVerification v = verify_heap(h.image, h.rt);
    REQUIRE(v.findings.size() == 1);
    CHECK(v.findings[0].kind == "free_list");
    CHECK(v.findings[0].chunk == 0x1000);
    CHECK(v.findings[0].where == "local-free list of page 0x20000000158");
  }
  SECTION("a block on two lists") {
    h.image.put(kPage + 32, block(3));  // local-free now starts at a block of the free list
    const HeapVerification v = verify_heap(h.image, h.rt);
    REQUIRE_FALSE(v.findings.empty());
    CHECK(v.findings[0].kind == "double_free");
  }
  SECTION("a thread-delayed list that loops") {
    h.image.put(block(9), block(9));
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(state_at(m, block(9)) == BlockState::tcache);
  }
  SECTION("a page whose used count disagrees with its lists: a finding, not damage") {
    h.image.put(kPage + 24, 9 | (kBlock << 32));
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK(m.complete);
    const HeapVerification v = verify_heap(h.image, h.rt);
    REQUIRE(v.findings.size() == 1);
    CHECK(v.findings[0].kind == "used_count");
  }
  SECTION("a slice entry that starts no run") {
    put_slice(h.image, kPage + 80, 0, 0, 0, 0, 0);
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(state_at(m, block(0)) == BlockState::in_use);  // the page before it is walked
    const HeapVerification v = verify_heap(h.image, h.rt);
    REQUIRE(v.findings.size() == 1);
    CHECK(v.findings[0].kind == "slice");
    // The arena still adds up: what was not walked is overhead.
    const ArenaInfo& a = m.arenas.front();
    std::uint64_t bytes = a.overhead_bytes;
    for (const StateTotal& t : a.totals) bytes += t.bytes;
    CHECK(bytes == a.system_bytes);
  }
  SECTION("a page whose blocks do not fit") {
    put_slice(h.image, kPage, 1, kCapacity, 5000, 7, kBlock);
    const HeapModel m = walk_heap(h.image, h.rt);
    CHECK_FALSE(m.complete);
    CHECK(m.blocks.size() == 1);  // the free span alone
    CHECK(verify_heap(h.image, h.rt).findings.at(0).kind == "page");
  }
}

TEST_CASE("mimalloc segment headers and statistics: look-alikes are rejected", "[mimalloc]") {
  Heap h;
  const Layout& l = layout_2_0_9();
  std::uint64_t key = 0;
  SECTION("no info slice") {
    h.image.put(kSegment + 232, 0);
    CHECK_FALSE(read_segment_header(h.image, l, kSegment, &key));
  }
  SECTION("an unknown kind") {
    h.image.put(kSegment + 240, 2);
    CHECK_FALSE(read_segment_header(h.image, l, kSegment, &key));
  }
  SECTION("slice entries that are not the segment's") {
    h.image.put(kSegment + 248, 100);
    CHECK_FALSE(read_segment_header(h.image, l, kSegment, &key));
  }
  SECTION("a first slice that is not the header's") {
    put_slice(h.image, kSegment + 264, 2, 0, 0, 0, kSliceBytes);
    CHECK_FALSE(read_segment_header(h.image, l, kSegment, &key));
  }
  SECTION("statistics") {
    CHECK(is_main_stats(h.image, l, kStats));
    CHECK_FALSE(is_main_stats(h.image, l, kTld + l.tld.stats));  // a thread's: nothing reserved
    h.image.put(kStats + 8, 5);  // segments freed 5, yet current = allocated
    CHECK_FALSE(is_main_stats(h.image, l, kStats));
  }
}

TEST_CASE("mimalloc runtime: statistics not found are said in what was found, not as a warning", "[mimalloc]") {
  // The library's file is not at hand (no symbols, no writable ranges to scan): _mi_stats_main cannot be
  // found. Only summary's figures need it, so it is not a warning every command would repeat.
  Heap h;
  SymbolSearchOptions options;
  options.use_debug_files = false;
  options.use_debuginfod = false;
  const SymbolIndex symbols(h.image, options);
  std::string error;
  const std::optional<Runtime> rt = locate_runtime(h.image, symbols, h.library, &error);
  REQUIRE(rt);
  CHECK_FALSE(rt->stats_main);
  const auto stats = std::find_if(rt->discovery.begin(), rt->discovery.end(),
                                  [](const Discovery& d) { return d.structure == "_mi_stats_main"; });
  REQUIRE(stats != rt->discovery.end());
  CHECK(stats->method.starts_with("not found"));
  CHECK(std::none_of(rt->warnings.begin(), rt->warnings.end(),
                     [](const std::string& w) { return w.find("_mi_stats_main") != std::string::npos; }));
}
