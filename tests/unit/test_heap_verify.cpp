// heap verify's checks on a hand-made main arena: a clean heap has no findings, and each kind of damage is
// named at the chunk that carries it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "runtime/glibc/chunk_walk.h"
#include "runtime/glibc/glibc_verify.h"
#include "synthetic_arena.h"

using namespace heapscope;
using namespace heapscope::glibc;
using heapscope::testing::FakeImage;
using namespace heapscope::testing;

namespace {

std::string finding_name(const std::string& kind, Address chunk) { return kind + " at " + std::to_string(chunk); }

struct SyntheticArena : MainArenaLayout {
  HeapModel model;

  // The model as the walker builds it: the chunk walk, then the fastbin chunks marked.
  HeapVerification verify() {
    model = HeapModel{};
    std::vector<Block> blocks(max_chunks(kHeap, kHeapEnd));
    BlockSink sink{blocks.data(), blocks.size(), 0};
    MemoryCursor mem(image);
    const SegmentWalk walk = walk_segment(mem, kHeap, kHeapEnd, kTop, 0, sink);
    blocks.resize(sink.count);
    for (Block& b : blocks)
      if (b.chunk == kD || b.chunk == kE) b.state = BlockState::fastbin;
      else if (b.chunk == kA) b.state = BlockState::tcache;
    for (const Block& b : blocks) model.blocks.push_back(b);
    ArenaInfo arena;
    arena.address = kArena;
    arena.is_main = true;
    arena.heaps.push_back({kHeap, kHeapEnd});
    if (walk.stopped_at) arena.walk_stops.push_back({kHeap, walk.stopped_at, walk.last_good});
    model.arenas.push_back(arena);
    return verify_heap(image, runtime, model);
  }
};

// "kind at 0x…" per finding: what the tests compare, readable when a comparison fails.
std::vector<std::string> kinds_and_chunks(const HeapVerification& v) {
  std::vector<std::string> out;
  for (const HeapFinding& f : v.findings) out.push_back(finding_name(f.kind, f.chunk));
  return out;
}

}  // namespace

TEST_CASE("verify: a clean heap has no findings and says what it checked") {
  SyntheticArena heap;
  const HeapVerification v = heap.verify();
  CHECK(v.findings.empty());
  CHECK(v.checked.arenas == 1);
  CHECK(v.checked.heaps == 1);
  CHECK(v.checked.chunks == 7);
  CHECK(v.checked.bin_entries == 1);
  CHECK(v.checked.fastbin_entries == 2);
  CHECK(v.checked.tcaches == 1);
  CHECK(v.checked.tcache_entries == 1);
  CHECK(v.notes.empty());
}

TEST_CASE("verify: a tcache bin whose list is shorter than its count is a tcache_count finding") {
  SyntheticArena heap;
  heap.set_tcache_bin(1, 2, kA + 16);  // a count of 2, one entry on the list
  const HeapVerification v = heap.verify();
  REQUIRE(kinds_and_chunks(v) == std::vector{finding_name("tcache_count", 0)});
  CHECK_THAT(v.findings[0].where, Catch::Contains("tcache bin 1 (48-byte chunks) of thread 1"));
}

TEST_CASE("verify: a tcache entry pointing at itself is a double free") {
  SyntheticArena heap;
  heap.image.put(kA + 16, protect(kA + 16, kA + 16));
  const HeapVerification v = heap.verify();
  CHECK(kinds_and_chunks(v) == std::vector{finding_name("double_free", kA)});
}

TEST_CASE("verify: a chunk both in a bin and in the tcache is a double free") {
  SyntheticArena heap;
  heap.set_tcache_bin(7, 1, kB + 16);  // B (144 bytes) is also on small bin 9
  const HeapVerification v = heap.verify();
  // B's links are the bin's, so its tcache link is garbage too (a tcache_link finding after this one).
  REQUIRE_FALSE(v.findings.empty());
  CHECK(kinds_and_chunks(v)[0] == finding_name("double_free", kB));
  CHECK_THAT(v.findings[0].found, Catch::Contains("small bin 9"));
}

TEST_CASE("verify: a damaged size field is named with the last good chunk before it") {
  SyntheticArena heap;
  heap.image.chunk(kC, 0x4141414141414140, 0x90);  // PREV_INUSE clear, as B is free
  const HeapVerification v = heap.verify();
  REQUIRE(kinds_and_chunks(v) == std::vector{finding_name("chunk_header", kC)});
  CHECK(v.findings[0].last_good == kB);
  CHECK(v.findings[0].heap == kHeap);
  CHECK_THAT(v.findings[0].found, Catch::Contains("0x4141414141414140"));
  // The fastbin chunks lie in the part the walk skipped: not reported as bad links.
}

TEST_CASE("verify: a free chunk's bk that does not point back is a bin_link finding") {
  SyntheticArena heap;
  heap.image.put(kB + 24, kA);
  const HeapVerification v = heap.verify();
  REQUIRE(kinds_and_chunks(v) == std::vector{finding_name("bin_link", kB)});
  CHECK_THAT(v.findings[0].where, Catch::Contains("small bin 9"));
}

TEST_CASE("verify: an fd into nowhere ends the bin with a finding at the chunk holding it") {
  SyntheticArena heap;
  heap.image.put(kB + 16, 0x4242424242424240);
  const HeapVerification v = heap.verify();
  REQUIRE(kinds_and_chunks(v) == std::vector{finding_name("bin_link", kB)});
  CHECK_THAT(v.findings[0].found, Catch::Contains("0x4242424242424240"));
}

TEST_CASE("verify: prev_size after a free chunk must be its size") {
  SyntheticArena heap;
  heap.image.put(kC, 0x80);
  const HeapVerification v = heap.verify();
  REQUIRE(kinds_and_chunks(v) == std::vector{finding_name("prev_size", kC)});
  CHECK(v.findings[0].last_good == kB);
}

TEST_CASE("verify: a chunk free by PREV_INUSE but on no bin is a prev_inuse finding") {
  SyntheticArena heap;
  const Address bin9 = heap.runtime.layout.bin_at(kArena, 9);
  heap.set_bin(9, bin9, bin9);
  const HeapVerification v = heap.verify();
  CHECK(kinds_and_chunks(v) == std::vector{finding_name("prev_inuse", kB)});
}

TEST_CASE("verify: a fastbin loop is a double free, and a chunk of the wrong size is named") {
  SyntheticArena heap;
  heap.image.put(kE + 16, protect(kE + 16, kD));  // E → D → E …: D freed twice
  HeapVerification v = heap.verify();
  REQUIRE(kinds_and_chunks(v) == std::vector{finding_name("double_free", kD)});
  CHECK(v.findings[0].last_good == kE);

  SyntheticArena sizes;
  sizes.image.put(kE + 16, protect(kE + 16, kC));  // C is 64 bytes, on the 32-byte fastbin
  sizes.image.put(kC + 16, protect(kC + 16, 0));
  v = sizes.verify();
  CHECK(kinds_and_chunks(v) == std::vector{finding_name("fastbin_size", kC)});
}

TEST_CASE("verify: a misaligned fastbin link is named at the chunk holding it") {
  SyntheticArena heap;
  heap.image.put(kD + 16, protect(kD + 16, kE + 8));
  const HeapVerification v = heap.verify();
  REQUIRE(kinds_and_chunks(v) == std::vector{finding_name("fastbin_link", kD)});
  CHECK(v.findings[0].last_good == 0);  // D is the list's first entry
}

TEST_CASE("verify: a top chunk that does not reach its heap's end is a top finding") {
  SyntheticArena heap;
  heap.image.put(kArena + heap.runtime.layout.arena.top, kE);  // top points at a fastbin chunk
  const HeapVerification v = heap.verify();
  CHECK(std::count_if(v.findings.begin(), v.findings.end(), [](const HeapFinding& f) { return f.kind == "top"; }) == 1);
}

namespace {

// A thread arena: its first heap at kFirstHeap holds heap_info, the arena and (in the two-heap case) an
// old top closed by a fencepost; the second heap, kHeapAlignment further, holds only heap_info and top.
constexpr Address kFirstHeap = 0x7fffe8000000;
constexpr std::uint64_t kHeapAlignment = 64ull << 20;
constexpr Address kSecondHeap = kFirstHeap + kHeapAlignment;
constexpr std::uint64_t kHeapSize = 0x21000;

struct ThreadArena {
  FakeImage image;
  Runtime runtime;
  HeapModel model;
  Address arena = 0;

  explicit ThreadArena(bool two_heaps) {
    runtime.layout = layout_for(36);
    runtime.main_arena = 0x7ffff7e19c80;  // not walked here
    const Layout& l = runtime.layout;
    arena = kFirstHeap + l.heap_info_size;
    image.add_region(kFirstHeap, kHeapSize);
    put_heap_info(kFirstHeap, 0);
    for (int bin = 1; bin < l.arena.bin_count; ++bin) {
      image.put(l.bin_at(arena, bin) + 16, l.bin_at(arena, bin));
      image.put(l.bin_at(arena, bin) + 24, l.bin_at(arena, bin));
    }
    const Address first_chunk = (arena + l.arena.size + 15) & ~Address{15};
    Address top = first_chunk;
    if (two_heaps) {
      image.add_region(kSecondHeap, kHeapSize);
      put_heap_info(kSecondHeap, kFirstHeap);
      image.chunk(first_chunk, (kFirstHeap + kHeapSize - first_chunk - 0x20) | kPrevInUse);  // in use
      image.chunk(kFirstHeap + kHeapSize - 0x20, 0x10 | kPrevInUse);                        // fencepost
      image.chunk(kFirstHeap + kHeapSize - 0x10, 0 | kPrevInUse);
      top = kSecondHeap + l.heap_info_size;
    }
    const Address heap_end = (two_heaps ? kSecondHeap : kFirstHeap) + kHeapSize;
    image.chunk(top, (heap_end - top) | kPrevInUse);
    image.put(arena + l.arena.top, top);
    image.put(arena + l.arena.system_mem, two_heaps ? 2 * kHeapSize : kHeapSize);
  }

  void put_heap_info(Address heap, Address prev) {
    image.put(heap, arena);
    image.put(heap + 8, prev);
    image.put(heap + 16, kHeapSize);
    image.put(heap + 24, kHeapSize);
  }

  // The model the walker builds when it reaches the heaps in `walked` (one block per chunk, by hand).
  HeapVerification verify(std::vector<Address> walked) {
    model = HeapModel{};
    ArenaInfo info;
    info.address = arena;
    for (Address heap : walked) {
      info.heaps.push_back({heap, heap + kHeapSize});
      const Address first = heap == kFirstHeap ? (arena + runtime.layout.arena.size + 15) & ~Address{15}
                                               : heap + runtime.layout.heap_info_size;
      Block b;
      b.chunk = first;
      b.size_units = static_cast<std::uint32_t>((image.read_u64(first + 8).value_or(0) & ~kFlagMask) / 16);
      b.state = first == image.read_u64(arena + runtime.layout.arena.top) ? BlockState::top : BlockState::in_use;
      model.blocks.push_back(b);
    }
    info.complete = walked.size() == 2 || walked == std::vector<Address>{kFirstHeap};
    model.arenas.push_back(info);
    return verify_heap(image, runtime, model);
  }
};

}  // namespace

TEST_CASE("verify: a thread arena's heaps and top check out") {
  ThreadArena one(false);
  CHECK(kinds_and_chunks(one.verify({kFirstHeap})).empty());
  ThreadArena two(true);
  const HeapVerification v = two.verify({kFirstHeap, kSecondHeap});
  CHECK(kinds_and_chunks(v).empty());
  CHECK(v.checked.heaps == 2);
}

TEST_CASE("verify: a heap_info whose mprotect_size is below its size is named") {
  ThreadArena heap(false);
  heap.image.put(kFirstHeap + 24, 0x1000);
  CHECK(kinds_and_chunks(heap.verify({kFirstHeap})) == std::vector{finding_name("heap_info", kFirstHeap)});
}

TEST_CASE("verify: a heap_info the walk could not follow is named, with the heap before it in the chain") {
  ThreadArena heap(true);
  heap.image.put(kFirstHeap, 0x4141414141414141);  // the first heap's ar_ptr overwritten
  const HeapVerification v = heap.verify({kSecondHeap});
  REQUIRE(kinds_and_chunks(v) == std::vector{finding_name("heap_info", kFirstHeap)});
  CHECK(v.findings[0].last_good == kSecondHeap);
  CHECK_THAT(v.findings[0].found, Catch::Contains("ar_ptr 0x4141414141414141"));
}

TEST_CASE("verify: a top chunk short of its heap's end is named") {
  ThreadArena heap(false);
  const Address top = heap.image.read_u64(heap.arena + heap.runtime.layout.arena.top).value();
  heap.image.chunk(top, 0x100 | kPrevInUse);
  CHECK(kinds_and_chunks(heap.verify({kFirstHeap})) == std::vector{finding_name("top", top)});
}
