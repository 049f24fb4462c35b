// A main arena made by hand for tests of the glibc walker and `verify`, and the fuzz target that damages
// it (tests/fuzz/fuzz_heap_walk.cpp): glibc 2.36's layout, one heap page with a chunk of every kind —
// A in thread 1's tcache, B free in small bin 9, C in use, D and E in fastbin 0, T holding the thread's
// tcache_perthread_struct — then top.
#pragma once

#include "fake_image.h"
#include "runtime/glibc/chunk_walk.h"
#include "runtime/glibc/glibc_runtime.h"

namespace heapscope::testing {

using namespace heapscope::glibc;

constexpr Address kArena = 0x7ffff7e19c80;
constexpr Address kHeap = 0x555555559000;
constexpr Address kHeapEnd = kHeap + 0x1000;
constexpr Address kA = kHeap, kB = kHeap + 0x30, kC = kHeap + 0xc0, kD = kHeap + 0x100, kE = kHeap + 0x120,
                  kT = kHeap + 0x140, kTop = kT + 0x290;
constexpr Address kTcache = kT + 16;
constexpr Address kThreadPointer = kArena + 0x1000;  // fs_base; the tcache pointer sits just below it
constexpr std::int64_t kTcacheSlotOffset = -0x10;

inline Address protect(Address slot, Address target) { return (slot >> 12) ^ target; }

struct MainArenaLayout {
  FakeImage image;
  glibc::Runtime runtime;

  MainArenaLayout() {
    runtime.layout = layout_for(36);
    runtime.main_arena = kArena;
    runtime.tcache_tp_offset = kTcacheSlotOffset;
    image.add_region(kArena & ~0xfffull, 0x2000);
    image.add_region(kHeap, 0x1000);
    image.add_thread(1, kThreadPointer, 0);
    image.put(kThreadPointer + kTcacheSlotOffset, kTcache);
    const Layout& l = runtime.layout;
    image.put(kArena + l.arena.top, kTop);
    for (int bin = 1; bin < l.arena.bin_count; ++bin) set_bin(bin, l.bin_at(kArena, bin), l.bin_at(kArena, bin));
    image.chunk(kA, 0x30 | kPrevInUse);
    image.chunk(kB, 0x90 | kPrevInUse);
    image.chunk(kC, 0x40, 0x90);
    image.chunk(kD, 0x20 | kPrevInUse);
    image.chunk(kE, 0x20 | kPrevInUse);
    image.chunk(kT, 0x290 | kPrevInUse);
    image.chunk(kTop, (kHeapEnd - kTop) | kPrevInUse);
    set_tcache_bin(1, 1, kA + 16);  // 48-byte chunks
    image.put(kA + 16, protect(kA + 16, 0));
    const Address bin9 = l.bin_at(kArena, 9);
    set_bin(9, kB, kB);
    image.put(kB + 16, bin9);
    image.put(kB + 24, bin9);
    image.put(kArena + l.arena.fastbins, kD);
    image.put(kD + 16, protect(kD + 16, kE));
    image.put(kE + 16, protect(kE + 16, 0));
  }

  void set_tcache_bin(int bin, std::uint16_t count, Address first_entry) {
    const Address counts_word = kTcache + (bin / 4) * 8;  // counts[] are uint16_t, four to a word
    const int shift = 16 * (bin % 4);
    const std::uint64_t others = image.read_u64(counts_word).value_or(0) & ~(std::uint64_t{0xffff} << shift);
    image.put(counts_word, others | (std::uint64_t{count} << shift));
    image.put(kTcache + runtime.layout.tcache_entries_offset() + bin * 8, first_entry);
  }

  void set_bin(int bin, Address fd, Address bk) {
    const Address head = runtime.layout.bin_at(kArena, bin);
    image.put(head + 16, fd);
    image.put(head + 24, bk);
  }
};

}  // namespace heapscope::testing
