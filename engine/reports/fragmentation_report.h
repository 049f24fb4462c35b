// Report of the fragmentation command: per arena, where the heap's bytes are and what could go back to the
// system; how full the heap's pages and 64 KiB regions are; and which types of live blocks hold the nearly
// empty pages and block trimming (queries/fragmentation.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "reports/graph_reports.h"

namespace heapscope {

inline constexpr int kFillBucketCount = 10;  // 0–10 %, 10–20 %, …, 90–100 %
using FillBuckets = std::array<std::uint64_t, kFillBucketCount>;

// A live (or tcache) chunk between a heap's end and the free bytes beneath it: while it stays, top cannot
// reach down past it.
struct TrimBlocker {
  BlockRef block;                 // user pointer, usable size, type
  std::string state;              // "in_use", or "tcache" (free to its thread, in use to the arena)
  Address chunk = 0;
  std::uint64_t chunk_bytes = 0;
  std::uint64_t bytes_above = 0;  // from its chunk to the heap's end
  // More bytes trimming would return if this chunk and every blocker above it were freed (top then
  // reaches down to the free chunks beneath it): page-rounded, with no pad kept, as malloc_trim(0) trims top.
  std::uint64_t returnable_if_freed = 0;
};

struct ArenaFragmentation {
  Address address = 0;  // the malloc_state
  bool is_main = false;
  // Whether heapscope knows its allocator's trimming rules: false for an arena of a heap beside malloc's (a
  // collector's) in a process whose malloc arenas have them; its trim figures are then 0 and not shown.
  bool trim_known = true;
  std::uint64_t heaps = 0;
  // Chunk bytes, headers included, as mallinfo2() counts them.
  std::uint64_t system_bytes = 0;
  std::uint64_t in_use_bytes = 0, in_use_blocks = 0;
  std::uint64_t free_bytes = 0;     // in regular bins (unsorted, small, large)
  std::uint64_t tcache_bytes = 0;
  std::uint64_t fastbin_bytes = 0;
  std::uint64_t top_bytes = 0;
  std::uint64_t overhead_bytes = 0;
  std::uint64_t largest_free_chunk = 0;  // in bins, fastbins or tcache; top not included
  // Returned to the system (system bytes shrink) by free()'s automatic trim, were it to run now: top beyond
  // top_pad once top reaches trim_threshold (a non-main arena's newest heap unmapped when it holds only top).
  std::uint64_t trim_on_free = 0;
  // malloc_trim(0): returned to the system from top (main arena only: sbrk back, no pad kept)...
  std::uint64_t malloc_trim_returned = 0;
  // ...and whole pages inside free chunks (fastbins consolidated first) handed back with madvise: resident
  // memory drops, the arena's system bytes do not.
  std::uint64_t malloc_trim_madvised = 0;
  std::vector<TrimBlocker> blockers;  // nearest the heap's end first
};

struct FragmentationSample {
  BlockRef block;
  std::optional<RetainerPath> path;  // a shortest path from a root; absent when none reaches it
};

struct FragmentationTypeRow {
  std::string type;
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;  // usable bytes
  std::vector<FragmentationSample> samples;
};

struct FragmentationReport {
  std::optional<std::uint64_t> trim_threshold, top_pad;  // absent when the allocator's settings are unknown
  // Empty when the allocator's trimming rules are known; else why the arenas' trim figures are absent
  // ("not available for tcmalloc: ..."), and they are 0.
  std::string trim_unavailable;
  std::uint64_t page_bytes = 0, region_bytes = 0;
  std::vector<ArenaFragmentation> arenas;
  // Every page and region of every heap, top chunks and mmapped chunks excluded, by the share of its bytes
  // live blocks use.
  std::uint64_t pages = 0, regions = 0;
  FillBuckets page_fill{}, region_fill{};
  // Live blocks starting in a page that is at most 10 % used, by type.
  std::uint64_t sparse_blocks = 0, sparse_bytes = 0, sparse_type_count = 0;
  std::vector<FragmentationTypeRow> sparse_types;   // most blocks first; at most -n rows
  // Live trim blockers of every arena, by type.
  std::vector<FragmentationTypeRow> blocker_types;  // most bytes first; at most -n rows
  // A slab allocator's size classes (their slabs' utilisation) and the free pages it keeps; empty for glibc.
  std::vector<SizeClassUse> size_classes;
  std::vector<FreePages> free_pages;
  // The heap walk skipped damaged or unreadable parts (skipped_bytes of heap): their pages are not
  // counted and the figures cover only what was walked (the first warning says so).
  bool partial = false;
  std::uint64_t skipped_bytes = 0;
  // What the allocator calls each block state (HeapModel::state_labels): the arena table's columns.
  StateLabels state_labels = glibc_state_labels();
  AllocatorTerms terms;  // HeapModel::terms: the arena table's and the size classes' words
  std::vector<std::string> warnings;
};

// The arena table's byte columns per block state, in the allocator's own terms (glibc's bins, tcache,
// fastbins and top; jemalloc's free and thread caches): a state the allocator never produces has none.
struct ArenaStateColumn {
  std::string heading;
  std::uint64_t ArenaFragmentation::*bytes;
};
inline std::vector<ArenaStateColumn> arena_state_columns(const FragmentationReport& r) {
  const auto label = [&](BlockState s) { return r.state_labels[static_cast<int>(s)]; };
  std::vector<ArenaStateColumn> out{{"in use", &ArenaFragmentation::in_use_bytes}};
  const std::pair<BlockState, std::uint64_t ArenaFragmentation::*> states[] = {
      {BlockState::free, &ArenaFragmentation::free_bytes},
      {BlockState::tcache, &ArenaFragmentation::tcache_bytes},
      {BlockState::fastbin, &ArenaFragmentation::fastbin_bytes},
      {BlockState::top, &ArenaFragmentation::top_bytes}};
  for (const auto& [state, bytes] : states)
    if (!label(state).empty()) out.push_back({state_heading(label(state)), bytes});
  return out;
}
inline bool has_top_chunks(const FragmentationReport& r) {
  return !r.state_labels[static_cast<int>(BlockState::top)].empty();
}

}  // namespace heapscope
