// jemalloc's structures as heapscope reads them: offsets for release 5.3.0 on x86-64 in the configuration
// Debian 12 builds (4 KiB pages, 16-byte quantum, 48-bit virtual addresses so a two-level radix tree with
// compact leaves, statistics and profiling compiled in, cache-oblivious large allocations). They were
// learnt from the release's headers compiled with that configuration and checked against Debian's
// libjemalloc2 5.3.0-1 and libjemalloc-dev's static library. Nothing here is trusted unchecked:
// jemalloc_runtime validates every structure it finds with them, and the walk checks each extent.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace heapscope::jemalloc {

inline constexpr std::string_view kKnownRelease = "5.3.0";
inline constexpr std::uint64_t kPageShift = 12;  // LG_PAGE
inline constexpr std::uint64_t kPageBytes = std::uint64_t{1} << kPageShift;
inline constexpr unsigned kVaddrBits = 48;  // LG_VADDR: the radix tree's key bits
inline constexpr std::size_t kSizeClasses = 232;  // SC_NSIZES: sz_index2size_tab's length
inline constexpr std::size_t kSmallClasses = 36;  // SC_NBINS: classes served from slabs (up to 14 KiB)
inline constexpr std::size_t kArenaLimit = 4095;  // MALLOCX_ARENA_LIMIT: je_arenas' length
inline constexpr std::size_t kSlabBitmapWords = 8;  // BITMAP_GROUPS_MAX: up to 512 regions a slab

// rtree_t, the whole of emap_t (je_arena_emap_global): every extent's pages → its edata_t.
struct RtreeLayout {
  std::uint64_t base = 0;   // base_t*: the metadata allocator it draws leaves from (arena 0's)
  std::uint64_t root = 120;  // rtree_node_elm_t[1 << 18], after an init mutex
  static constexpr unsigned kRootBits = 18, kLeafBits = 18;  // 36 bits of page number
  // A leaf element (compact: one word): szind in the top 16 bits, the edata_t pointer below (its low 7
  // bits are zero: edata_t is 128-byte aligned), then state (3 bits at 2), is_head (bit 1), slab (bit 0).
  static constexpr unsigned kLeafStateShift = 2;
  static constexpr std::uint64_t kEdataAlignment = 128;
};

// edata_t: one extent (a slab, a large allocation, or free pages of an arena).
struct EdataLayout {
  std::uint64_t bits = 0;      // arena:12, slab:1, committed, pai, zeroed, guarded, state:3, szind:8, nfree:10, ...
  std::uint64_t addr = 8;      // the extent's start (a large one's user pointer, offset into its first page)
  std::uint64_t size_esn = 16;  // size in bytes, the low 12 bits a serial number
  std::uint64_t slab_bitmap = 64;  // bitmap_t[8]: a slab's regions, bit set = region free
  std::uint64_t size = 128;
  static constexpr unsigned kArenaShift = 0, kArenaBits = 12;
  static constexpr unsigned kSlabShift = 12;
  static constexpr unsigned kStateShift = 17, kStateBits = 3;
  static constexpr unsigned kSzindShift = 20, kSzindBits = 8;
  static constexpr unsigned kNfreeShift = 28, kNfreeBits = 10;
};

// extent_state_t.
enum class ExtentState : unsigned { active = 0, dirty = 1, muzzy = 2, retained = 3, transition = 4, merging = 5 };

// bin_info_t (je_bin_infos[36]): a small size class's slab geometry.
struct BinInfoLayout {
  std::uint64_t reg_size = 0, slab_size = 8, nregs = 16, n_shards = 20, nbits = 24;
  std::uint64_t stride = 40;
};

// arena_t (je_arenas[i]).
struct ArenaLayout {
  std::uint64_t large_stats = 976;  // stats.lstats[SC_NSIZES - SC_NBINS]
  std::uint64_t large_stats_stride = 48;
  std::uint64_t large_stats_allocations = 0;  // nmalloc (the large classes' allocations less their frees
  std::uint64_t large_stats_frees = 8;        // ndalloc  are jemalloc's count of large extents in use)
  std::uint64_t cache_bin_descriptors = 10400;  // ql_head of cache_bin_array_descriptor_t: its threads' caches
  std::uint64_t dirty_pages = 20480;    // pa_shard.pac.ecache_dirty.eset.npages
  std::uint64_t muzzy_pages = 39920;    // pa_shard.pac.ecache_muzzy.eset.npages
  std::uint64_t retained_pages = 59360;  // pa_shard.pac.ecache_retained.eset.npages
  std::uint64_t ind = 78928;   // unsigned: its index in je_arenas
  std::uint64_t base = 78936;  // base_t*: its metadata allocator
  std::uint64_t bins = 78952;  // bin_t[Σ n_shards]
  std::uint64_t bin_stride = 224;
  std::uint64_t bin_current_regions = 136;  // bin_t.stats.curregs
  std::uint64_t bin_current_slabs = 176;    // bin_t.stats.curslabs
};

// base_t: an arena's metadata allocator, and its chain of blocks (base_block_t: size, next).
struct BaseLayout {
  std::uint64_t ehooks_ind = 0;  // unsigned: the arena index its extent hooks belong to
  std::uint64_t ehooks = 8;      // extent_hooks_t*: the default hooks, a table in the library
  std::uint64_t blocks = 160;    // base_block_t*
  std::uint64_t block_size = 0, block_next = 8;
};

// cache_bin_array_descriptor_t (a thread cache, listed by its arena) and cache_bin_t (one size class's
// stack of cached pointers: from stack_head up to the position whose low 16 bits are low_bits_empty; the
// stack can grow down to low_bits_full). A thread cache's stacks share one allocation of its arena 0.
struct CacheBinLayout {
  std::uint64_t descriptor_next = 0, descriptor_bins = 16;
  std::uint64_t stack_head = 0, low_bits_full = 18, low_bits_empty = 20;
  std::uint64_t stride = 24;
  static constexpr std::size_t kMaxBins = 73;  // TCACHE_NBINS_MAX
};

// Heap profiling (MALLOC_CONF=prof:true). A sampled allocation is always an extent of its own (a small
// one is promoted: a large extent whose size class says the small one), and that extent's edata_t holds
// e_prof_info where a slab's holds its bitmap: the allocation's time and requested size, and its
// prof_tctx_t (the value 1 for an extent allocated unsampled). The tctx (one per thread and stack) leads
// to its prof_gctx_t (one per stack), whose bt.vec points at the return addresses kept inline after it.
struct ProfLayout {
  std::uint64_t edata_alloc_time = 64;  // nstime_t: nanoseconds of jemalloc's clock (CLOCK_MONOTONIC)
  std::uint64_t edata_alloc_size = 72;  // size_t: bytes requested
  std::uint64_t edata_tctx = 80;        // prof_tctx_t*
  std::uint64_t tctx_gctx = 96;         // after tdata, thr_uid, thr_discrim, recent_count, cnts (8 words)
  std::uint64_t gctx_bt_vec = 104;      // prof_bt_t bt: vec, then len (unsigned)
  std::uint64_t gctx_bt_len = 112;
  std::uint64_t gctx_frames = 120;      // void* vec[len], where bt.vec points
  static constexpr unsigned kMaxFrames = 128;  // PROF_BT_MAX
  static constexpr std::uint64_t kUnsampled = 1;  // (prof_tctx_t*)1U
};

struct Layout {
  RtreeLayout rtree;
  EdataLayout edata;
  BinInfoLayout bin_info;
  ArenaLayout arena;
  BaseLayout base;
  CacheBinLayout cache_bin;
  ProfLayout prof;
};

const Layout& layout_5_3();

// One radix tree leaf element, decoded.
struct LeafEntry {
  std::uint64_t edata = 0;  // the edata_t, 0 for a page no extent covers
  ExtentState state = ExtentState::active;
  bool slab = false;
};
inline LeafEntry decode_leaf(std::uint64_t bits) {
  LeafEntry e;
  // The pointer sits in the low 48 bits, sign-extended back to a canonical address.
  const auto canonical = static_cast<std::uint64_t>(static_cast<std::int64_t>(bits << (64 - kVaddrBits)) >>
                                                    (64 - kVaddrBits));
  e.edata = canonical & ~(RtreeLayout::kEdataAlignment - 1);
  e.state = static_cast<ExtentState>((bits >> RtreeLayout::kLeafStateShift) & 7);
  e.slab = bits & 1;
  return e;
}

// The first words of an edata_t, decoded.
struct Extent {
  std::uint64_t address = 0;  // e_addr: the start, or a large allocation's user pointer
  std::uint64_t size = 0;     // bytes, whole pages
  std::uint32_t arena = 0;
  bool slab = false;
  ExtentState state = ExtentState::active;
  std::uint32_t szind = 0;    // size class index
  std::uint32_t nfree = 0;    // a slab's free regions
  std::uint64_t base() const { return address & ~(kPageBytes - 1); }
  std::uint64_t end() const { return base() + size; }
};
inline Extent decode_extent(std::uint64_t bits, std::uint64_t address, std::uint64_t size_esn) {
  using L = EdataLayout;
  auto field = [bits](unsigned shift, unsigned width) {
    return static_cast<std::uint32_t>((bits >> shift) & ((std::uint64_t{1} << width) - 1));
  };
  Extent e;
  e.address = address;
  e.size = size_esn & ~(kPageBytes - 1);
  e.arena = field(L::kArenaShift, L::kArenaBits);
  e.slab = field(L::kSlabShift, 1);
  e.state = static_cast<ExtentState>(field(L::kStateShift, L::kStateBits));
  e.szind = field(L::kSzindShift, L::kSzindBits);
  e.nfree = field(L::kNfreeShift, L::kNfreeBits);
  return e;
}

// Where the hidden globals lie in one known build of the shared library (file virtual addresses of its
// .bss, from the build-id's file), tried before a scan.
struct KnownBuild {
  std::string_view build_id;
  std::string_view description;
  std::uint64_t arenas;       // je_arenas
  std::uint64_t emap;         // je_arena_emap_global
  std::uint64_t bin_infos;    // je_bin_infos
  std::uint64_t size_table;   // je_sz_index2size_tab
  std::uint64_t opt_prof;     // je_opt_prof (bool): profiling on (MALLOC_CONF=prof:true)
  std::uint64_t lg_prof_sample;  // je_lg_prof_sample (size_t): log2 of the mean bytes between samples
};
std::optional<KnownBuild> known_build(std::string_view build_id);

}  // namespace heapscope::jemalloc
