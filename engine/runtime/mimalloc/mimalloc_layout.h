// mimalloc's structures as heapscope reads them: release 2.0.9 on x86-64 in a release build (no
// MI_DEBUG, MI_SECURE 0, so no block padding, no encoded free lists, and MI_STAT 0: only the statistics
// mimalloc keeps in every build), learnt from the release's mimalloc-types.h and checked against Debian 12's
// libmimalloc2.0. Nothing here is trusted unchecked: mimalloc_runtime and mimalloc_heap check every
// structure they read with it.
#pragma once

#include <cstdint>

#include "runtime/struct_bytes.h"

namespace heapscope::mimalloc {

// Memory comes in segments of 32 MiB aligned to their size (a huge segment: larger, same alignment), each
// cut into 64 KiB slices; a page is a run of slices holding blocks of one size.
inline constexpr unsigned kSliceShift = 16;
inline constexpr std::uint64_t kSliceBytes = std::uint64_t{1} << kSliceShift;
inline constexpr unsigned kSegmentShift = 25;
inline constexpr std::uint64_t kSegmentBytes = std::uint64_t{1} << kSegmentShift;
inline constexpr std::uint64_t kSlicesPerSegment = kSegmentBytes / kSliceBytes;  // 512
// A page of blocks of 8 to 1024 bytes starts this far into its first slice (3 * MI_MAX_ALIGN_GUARANTEE),
// so that small blocks do not all start on page boundaries.
inline constexpr std::uint64_t kSmallPageStartOffset = 384;
inline constexpr std::uint64_t kSmallPageOffsetMaxBlock = 1024;
// xblock_size of a page whose block is 2 GiB or more: its block is then the whole page.
inline constexpr std::uint32_t kHugeBlockSize = 0x80000000u;

// mi_page_t (a segment's slices array holds one per slice; the first slice of a page is its mi_page_t).
struct PageLayout {
  std::uint64_t slice_count = 0;   // uint32: slices of this page (or free span); 0 inside one
  std::uint64_t slice_offset = 4;  // uint32: bytes back to the page's first slice entry
  std::uint64_t capacity = 10;     // uint16: blocks initialised so far
  std::uint64_t reserved = 12;     // uint16: blocks the page has room for
  std::uint64_t flags = 14;        // uint8: in_full (bit 0), has_aligned (bit 1)
  std::uint64_t free = 16;         // mi_block_t*: what malloc allocates from
  std::uint64_t used = 24;         // uint32: blocks in use, counting those on the thread-free list
  std::uint64_t xblock_size = 28;  // uint32: block bytes; 0 for a free span
  std::uint64_t local_free = 32;   // mi_block_t*: blocks this thread freed, not yet moved to `free`
  std::uint64_t xthread_free = 40;  // tagged mi_block_t*: blocks other threads freed (low 2 bits: delayed state)
  std::uint64_t xheap = 48;         // mi_heap_t*: the owning heap (null while abandoned)
  std::uint64_t next = 56, prev = 64;  // the heap's page queue
  std::uint64_t size = 80;
};

// mi_segment_t: the segment's header, at its start, followed by its slices.
struct SegmentLayout {
  std::uint64_t commit_mask = 112;          // mi_commit_mask_t: 512 bits, one per 64 KiB
  std::uint64_t used = 208;                 // size_t: pages in use
  std::uint64_t cookie = 216;               // uintptr: the segment's address xor the main heap's cookie
  std::uint64_t segment_slices = 224;       // size_t: 512, or more for a huge segment
  std::uint64_t segment_info_slices = 232;  // size_t: slices the header takes
  std::uint64_t kind = 240;                 // enum: 0 normal, 1 huge
  std::uint64_t slice_entries = 248;        // size_t: entries of `slices` (at most 512)
  std::uint64_t thread_id = 256;            // the owning thread (its fs base); 0 once abandoned or freed
  std::uint64_t abandoned = 192;            // size_t: pages abandoned (their thread ended)
  std::uint64_t slices = 264;               // mi_page_t[513]
  std::uint64_t header_bytes = slices;      // what must be read before the slices
  static constexpr std::uint64_t kCommitMaskWords = 8;
  static constexpr std::uint32_t kNormal = 0, kHuge = 1;
  static constexpr std::uint64_t kMaxInfoSlices = 4;  // 1 in a release build (2 with MI_SECURE's guard page)
};

// mi_heap_t: one per thread (its backing heap) plus any the program creates with mi_heap_new.
struct HeapLayout {
  std::uint64_t tld = 0;                     // mi_tld_t*
  std::uint64_t thread_delayed_free = 2840;  // mi_block_t*: blocks other threads freed into full pages
  std::uint64_t thread_id = 2848;
  std::uint64_t cookie = 2864;
  std::uint64_t page_count = 3024;
  std::uint64_t next = 3048;  // the thread's list of heaps
  std::uint64_t size = 3064;
};

// mi_tld_t: a thread's data (the main thread's is a static of the library, others' from mmap).
struct TldLayout {
  std::uint64_t heap_backing = 16;
  std::uint64_t heaps = 24;
  std::uint64_t stats = 960;  // mi_stats_t
};

// mi_stats_t with MI_STAT 0: counts {allocated, freed, peak, current} of int64, then counters.
struct StatsLayout {
  static constexpr std::uint64_t kCountBytes = 32;
  static constexpr std::uint64_t kCurrent = 24;  // within a count
  static constexpr std::uint64_t kCounts = 14;   // segments .. segments_cache
  std::uint64_t segments = 0;
  std::uint64_t reserved = 2 * kCountBytes;
  std::uint64_t committed = 3 * kCountBytes;
  std::uint64_t segments_abandoned = 6 * kCountBytes;
  std::uint64_t size = kCounts * kCountBytes + 8 * 16;
};

struct Layout {
  PageLayout page;
  SegmentLayout segment;
  HeapLayout heap;
  TldLayout tld;
  StatsLayout stats;
};

inline constexpr unsigned kKnownVersion = 209;  // mi_version() of 2.0.9
const Layout& layout_2_0_9();

}  // namespace heapscope::mimalloc
