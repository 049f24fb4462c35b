// Byte layout of glibc malloc's structures on x86-64, per glibc release (2.26 and later; tested 2.28-2.40).
// Written from glibc's malloc/malloc.c and arena.c; the comments name the fields so the numbers can be
// checked against the source of a given release.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace heapscope::glibc {

inline constexpr int kOldestKnownMinor = 28;
inline constexpr int kNewestKnownMinor = 40;

// Chunk header: prev_size at +0, size (with flag bits) at +8, user memory at +16.
inline constexpr std::uint64_t kPrevInUse = 1, kIsMmapped = 2, kNonMainArena = 4, kFlagMask = 7;
inline constexpr std::uint64_t kMinChunkSize = 32;
inline constexpr std::uint64_t kDefaultHeapMaxSize = 64ull << 20;  // HEAP_MAX_SIZE: 2 * DEFAULT_MMAP_THRESHOLD_MAX

struct MallocStateLayout {  // struct malloc_state, unchanged since have_fastchunks arrived in 2.27
  std::uint64_t flags = 4;            // int flags (after the int mutex)
  std::uint64_t fastbins = 16;        // mfastbinptr fastbinsY[10]
  int fastbin_count = 10;
  std::uint64_t top = 96;
  std::uint64_t last_remainder = 104;
  std::uint64_t bins = 112;           // mchunkptr bins[254]: bin i's fd/bk at bins[(i-1)*2], [(i-1)*2+1]
  int bin_count = 128;                // NBINS; bin 0 does not exist
  std::uint64_t next = 2160;          // struct malloc_state *next (the arena ring)
  std::uint64_t next_free = 2168;
  std::uint64_t system_mem = 2184;
  std::uint64_t size = 2200;
  static constexpr int kNonContiguousBit = 2;
};

struct MallocParLayout {  // struct malloc_par mp_: offsets relative to the struct
  std::uint64_t trim_threshold = 0;                // unsigned long, first in every release
  std::uint64_t top_pad = 8;                       // INTERNAL_SIZE_T, right after it
  std::uint64_t sbrk_base = 96;                    // 72 before 2.35 (hugepage fields were added before it)
  std::optional<std::uint64_t> hp_pagesize = 48;  // 2.35+
  // Fields near sbrk_base, as distances to it. The int counters sit 4 bytes further away since 2.35,
  // where int hp_flags before them leaves no padding after no_dyn_threshold.
  std::int64_t n_mmaps_from_sbrk = -36;           // int (-32 before 2.35)
  std::int64_t n_mmaps_max_from_sbrk = -32;       // int (-28 before 2.35)
  std::int64_t max_n_mmaps_from_sbrk = -28;       // int (-24 before 2.35)
  // These keep their distance in every supported release:
  std::int64_t mmapped_mem_from_sbrk = -16;
  std::int64_t max_mmapped_mem_from_sbrk = -8;
  std::int64_t tcache_bins_from_sbrk = 8;
  std::int64_t tcache_max_bytes_from_sbrk = 16;
  std::int64_t tcache_count_from_sbrk = 24;
};

struct Layout {
  int minor = 0;                    // glibc 2.<minor>; 0 when unknown
  bool safe_linking = true;         // 2.32+: tcache/fastbin next pointers are stored as (&next >> 12) ^ next
  bool tcache_counts_u16 = true;    // 2.30+: uint16_t counts[64], before: char counts[64]
  std::uint64_t heap_info_size = 48;  // sizeof(heap_info): 2.35 added size_t pagesize (32 before)
  int tcache_bin_count = 64;        // TCACHE_MAX_BINS
  MallocStateLayout arena;
  MallocParLayout par;

  std::uint64_t tcache_struct_size() const { return (tcache_counts_u16 ? 2 : 1) * 64 + 64 * 8; }
  std::uint64_t tcache_chunk_size() const { return (tcache_struct_size() + 8 + 15) & ~std::uint64_t{15}; }
  std::uint64_t tcache_entries_offset() const { return (tcache_counts_u16 ? 2 : 1) * 64; }
  std::string name() const { return minor ? "2." + std::to_string(minor) : "unknown"; }
  // Bin i of an arena as glibc sees it (bin_at): a pseudo-chunk whose fd/bk fields are bins[(i-1)*2..].
  std::uint64_t bin_at(std::uint64_t arena_address, int i) const { return arena_address + arena.bins + (i - 1) * 16 - 16; }
  // An arena's top before its first allocation: its own first bin (glibc's initial_top).
  std::uint64_t initial_top(std::uint64_t arena_address) const { return bin_at(arena_address, 1); }
};

// Layout for glibc 2.<minor>; minor 0 (unknown version) gives the newest known layout.
Layout layout_for(int minor);

// Decodes a safe-linked pointer stored at `slot` (no-op when the layout predates safe-linking).
inline std::uint64_t reveal_pointer(const Layout& l, std::uint64_t slot, std::uint64_t stored) {
  return l.safe_linking ? (slot >> 12) ^ stored : stored;
}

}  // namespace heapscope::glibc
