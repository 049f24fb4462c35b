// One big heap walked on several cores. A glibc heap is a chain: each chunk's size says where the next
// starts, so a walk cannot simply begin in the middle. Each slice but the first starts at a place that
// looks like a chunk header (a run of plausible sizes, free chunks' sizes repeated in their successors'
// prev_size), and walks to its end. The slices are then joined in order: the true walk, coming from the
// slice before, enters the slice at one chunk; if the slice's own walk passed that chunk, everything from
// it on is the true walk's (two walks that meet at a chunk are one walk from there), and what came before
// it is dropped. A slice whose walk never met it is walked again from that chunk, on one core. So the
// result is the one serial walk's, block for block, whatever the guesses were.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/glibc/chunk_walk.h"

namespace heapscope::glibc {

// The least bytes a slice of its own is worth: below this a heap is walked whole.
inline constexpr std::uint64_t kSliceBytes = std::uint64_t{32} << 20;

struct HeapSlice {
  Address start = 0;  // the heap's first chunk for the first slice; for the others, where to look for one
  Address limit = 0;  // the slice ends at the first chunk at or past it (0: the heap's end)
};

// How to cut [first_chunk, end) for `workers` cores: one slice when the heap is small or there is one core,
// else up to four a worker (other heaps share the pool), none smaller than `slice_bytes`.
std::vector<HeapSlice> slices_of(Address first_chunk, Address end, unsigned workers,
                                 std::uint64_t slice_bytes = kSliceBytes);

// The first address at or after `from` (and before `end`) where 16 chunks in a row look like glibc's, or
// 0 when none does within `search_bytes`.
Address likely_chunk_start(MemoryCursor& mem, Address from, Address end, std::uint64_t search_bytes = 1 << 20);

// A slice's walk: into its own sink; `skip` blocks at its start are dropped by the join.
struct SliceWalk {
  HeapSlice slice;
  BlockSink sink;
  SegmentWalk result;
  std::size_t skip = 0;
};

// Walks slice `index` of a heap: from its start for the first, from a likely chunk start for the others.
void walk_slice(MemoryCursor& mem, SliceWalk& walk, std::size_t index, Address end, Address top,
                std::uint16_t arena);

// Joins a heap's slice walks (in address order) into the heap's walk, walking again on this thread where
// needed; sets each slice's `skip` and sink count so that the kept blocks, slice after slice, are the
// serial walk's.
SegmentWalk join_slices(MemoryCursor& mem, const std::vector<SliceWalk*>& slices, Address end, Address top,
                        std::uint16_t arena);

}  // namespace heapscope::glibc
