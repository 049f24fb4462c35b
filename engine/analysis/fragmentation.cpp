#include "analysis/fragmentation.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "analysis/block_refs.h"
#include "analysis/retention_paths.h"
#include "analysis/type_groups.h"
#include "util/phase_timer.h"

namespace heapscope {

namespace {

// glibc's MINSIZE and sizeof(struct malloc_chunk) on x86-64.
constexpr std::uint64_t kMinChunkBytes = 32;
constexpr std::uint64_t kFreeChunkHeaderBytes = 48;
// glibc's DEFAULT_TRIM_THRESHOLD and the top pad its releases start with, for heaps whose mp_ was not found.
constexpr TrimSettings kGlibcDefaultTrim{128 * 1024, 128 * 1024};

std::uint64_t align_down(std::uint64_t v, std::uint64_t to) { return v - v % to; }
std::uint64_t align_up(std::uint64_t v, std::uint64_t to) { return align_down(v + to - 1, to); }

bool coalescable(BlockState s) { return s == BlockState::free || s == BlockState::fastbin; }

std::uint64_t chunk_end(const Block& b) { return b.chunk + b.chunk_size(); }

// Blocks [first, last) of the heap array that lie in [start, end).
std::pair<std::size_t, std::size_t> blocks_in(const HeapModel& heap, Address start, Address end) {
  const Block* begin = heap.blocks.begin();
  const Block* lo = std::lower_bound(begin, heap.blocks.end(), start, [](const Block& b, Address a) { return b.chunk < a; });
  const Block* hi = std::lower_bound(lo, heap.blocks.end(), end, [](const Block& b, Address a) { return b.chunk < a; });
  return {static_cast<std::size_t>(lo - begin), static_cast<std::size_t>(hi - begin)};
}

// The arena's top chunk, or kNoBlock.
BlockId top_of(const HeapModel& heap, std::size_t arena) {
  for (const HeapSegment& seg : heap.arenas[arena].heaps) {
    auto [first, last] = blocks_in(heap, seg.start, seg.end);
    if (first < last && heap.blocks[last - 1].state == BlockState::top) return static_cast<BlockId>(last - 1);
  }
  return kNoBlock;
}

void add_state_bytes(ArenaFragmentation& out, const Block& b) {
  const std::uint64_t n = b.chunk_size();
  switch (b.state) {
    case BlockState::in_use: out.in_use_bytes += n; ++out.in_use_blocks; break;
    case BlockState::free: out.free_bytes += n; break;
    case BlockState::tcache: out.tcache_bytes += n; break;
    case BlockState::fastbin: out.fastbin_bytes += n; break;
    case BlockState::top: out.top_bytes += n; break;
    case BlockState::mmapped: break;
  }
  if (b.state == BlockState::free || b.state == BlockState::fastbin || b.state == BlockState::tcache)
    out.largest_free_chunk = std::max(out.largest_free_chunk, n);
}

// malloc_trim(0)'s madvise share of one segment: after malloc_consolidate, every run of adjacent free and
// fastbin chunks is one free chunk; a run that reaches top joins top instead. Returns the bytes madvised and
// where top would then start.
std::pair<std::uint64_t, Address> consolidated_pages(const HeapModel& heap, std::size_t first, std::size_t last,
                                                     std::uint64_t page) {
  std::uint64_t madvised = 0;
  Address run_start = 0, run_end = 0;
  auto close_run = [&] {
    if (run_end > run_start) madvised += madvisable_bytes(run_start, run_end - run_start, page);
    run_start = run_end = 0;
  };
  Address top_start = 0;
  for (std::size_t i = first; i < last; ++i) {
    const Block& b = heap.blocks[i];
    if (b.state == BlockState::top) {
      top_start = (run_end == b.chunk) ? run_start : b.chunk;
      if (run_end == b.chunk) run_start = run_end = 0;
      continue;
    }
    if (!coalescable(b.state)) {
      close_run();
      continue;
    }
    if (run_end != b.chunk) {
      close_run();
      run_start = b.chunk;
    }
    run_end = chunk_end(b);
  }
  close_run();
  return {madvised, top_start};
}

// Walks down from the top chunk of one segment: each in-use or tcache chunk is a blocker; freeing it and the
// blockers above lets top reach down through the free chunks beneath it.
void find_blockers(const HeapModel& heap, std::size_t first, BlockId top,
                   std::uint64_t page, std::size_t max_blockers, ArenaFragmentation& out,
                   std::vector<BlockId>* blocker_ids) {
  const Block& t = heap.blocks[top];
  const Address heap_end = chunk_end(t);
  // Measured without a pad, as malloc_trim(0) trims: with free()'s top_pad (128 KiB by default) the first
  // few blockers of a small heap would all read 0, hiding which of them matter.
  const std::uint64_t now = trimmable_top_bytes(t.chunk_size(), 0, page);
  std::size_t i = top;
  while (i > first && out.blockers.size() < max_blockers) {
    --i;
    const Block& b = heap.blocks[i];
    if (coalescable(b.state)) continue;
    // Top would start at the lowest of the free chunks directly beneath this blocker.
    std::size_t below = i;
    while (below > first && coalescable(heap.blocks[below - 1].state) &&
           chunk_end(heap.blocks[below - 1]) == heap.blocks[below].chunk)
      --below;
    const Address new_top = below < i ? heap.blocks[below].chunk : b.chunk;
    TrimBlocker blocker;
    blocker.state = block_state_name(b.state);
    blocker.chunk = b.chunk;
    blocker.chunk_bytes = b.chunk_size();
    blocker.bytes_above = heap_end - b.chunk;
    blocker.returnable_if_freed = trimmable_top_bytes(heap_end - new_top, 0, page) - now;
    out.blockers.push_back(std::move(blocker));
    if (blocker_ids) blocker_ids->push_back(static_cast<BlockId>(i));
  }
}

}  // namespace

int fill_bucket(std::uint64_t live, std::uint64_t bytes) {
  if (bytes == 0 || live * 10 <= bytes) return 0;
  const std::uint64_t tenths_up = (live * 10 + bytes - 1) / bytes;  // ceil(10 · live / bytes), 2..10
  return static_cast<int>(std::min<std::uint64_t>(tenths_up, kFillBucketCount) - 1);
}

OccupancyCounter::OccupancyCounter(std::uint64_t granule_bytes, SparseSink sparse)
    : granule_(granule_bytes), sparse_(std::move(sparse)) {}

std::uint64_t OccupancyCounter::granules() const {
  std::uint64_t n = 0;
  for (std::uint64_t c : buckets_) n += c;
  return n;
}

void OccupancyCounter::begin_range(Address start, Address end) {
  range_start_ = start;
  range_end_ = end;
  open_ = start < end;
  current_ = index_of(start);
  current_live_ = 0;
  current_blocks_.clear();
}

void OccupancyCounter::close_current() {
  const Address g_start = std::max(current_ * granule_, range_start_);
  const Address g_end = std::min((current_ + 1) * granule_, range_end_);
  if (g_start < g_end) {
    const int bucket = fill_bucket(current_live_, g_end - g_start);
    ++buckets_[bucket];
    if (bucket == 0 && sparse_)
      for (BlockId b : current_blocks_) sparse_(b);
  }
  current_live_ = 0;
  current_blocks_.clear();
}

void OccupancyCounter::move_to(std::uint64_t granule) {
  if (granule == current_) return;
  close_current();
  buckets_[0] += granule - current_ - 1;  // granules in between: inside the range, nothing live
  current_ = granule;
}

void OccupancyCounter::add_live(Address start, Address end, BlockId block) {
  start = std::max(start, range_start_);
  end = std::min(end, range_end_);
  if (!open_ || start >= end) return;
  move_to(index_of(start));
  if (sparse_ && block != kNoBlock) current_blocks_.push_back(block);
  const Address current_end = (current_ + 1) * granule_;
  if (end <= current_end) {
    current_live_ += end - start;
    return;
  }
  current_live_ += current_end - start;
  close_current();
  const std::uint64_t whole = (end - current_end) / granule_;  // granules the block covers entirely
  buckets_[kFillBucketCount - 1] += whole;
  current_ = index_of(current_end) + whole;
  current_live_ = end - current_ * granule_;  // the block's tail in the granule after them (may be 0)
}

void OccupancyCounter::end_range() {
  if (!open_) return;
  // A block ending on the range's last granule boundary leaves current_ one past it, with nothing to close.
  if (current_ <= index_of(range_end_ - 1)) {
    move_to(index_of(range_end_ - 1));
    close_current();
  }
  open_ = false;
}

std::uint64_t trimmable_top_bytes(std::uint64_t top_bytes, std::uint64_t pad, std::uint64_t page_bytes) {
  if (top_bytes <= pad + kMinChunkBytes + 1) return 0;
  return align_down(top_bytes - pad - kMinChunkBytes - 1, page_bytes);
}

std::uint64_t madvisable_bytes(Address chunk, std::uint64_t chunk_bytes, std::uint64_t page_bytes) {
  if (chunk_bytes <= page_bytes - 1 + kFreeChunkHeaderBytes) return 0;
  const Address first_page = align_up(chunk + kFreeChunkHeaderBytes, page_bytes);
  const Address end = chunk + chunk_bytes;
  if (end <= first_page) return 0;
  return align_down(end - first_page, page_bytes);
}

ArenaFragmentation arena_fragmentation(const HeapModel& heap, std::size_t arena, const TrimSettings& trim,
                                       std::size_t max_blockers, std::vector<BlockId>* blocker_ids) {
  const ArenaInfo& info = heap.arenas[arena];
  const std::uint64_t page = kFragmentationPageBytes;
  ArenaFragmentation out;
  out.address = info.address;
  out.is_main = info.is_main;
  out.heaps = info.heaps.size();
  out.system_bytes = info.system_bytes;
  out.overhead_bytes = info.overhead_bytes;
  const BlockId top = top_of(heap, arena);
  for (const HeapSegment& seg : info.heaps) {
    auto [first, last] = blocks_in(heap, seg.start, seg.end);
    for (std::size_t i = first; i < last; ++i) add_state_bytes(out, heap.blocks[i]);
    const auto [madvised, top_start] = consolidated_pages(heap, first, last, page);
    out.malloc_trim_madvised += madvised;
    if (top == kNoBlock || top < first || top >= last) continue;
    const Block& t = heap.blocks[top];
    if (t.chunk_size() >= trim.threshold) out.trim_on_free = trimmable_top_bytes(t.chunk_size(), trim.pad, page);
    // heap_trim unmaps a non-main arena's newest heap when top is all it holds.
    if (!info.is_main && first == top && &seg != &info.heaps.front()) out.trim_on_free = seg.end - seg.start;
    if (info.is_main) out.malloc_trim_returned = trimmable_top_bytes(chunk_end(t) - top_start, 0, page);
    find_blockers(heap, first, top, page, max_blockers, out, blocker_ids);
  }
  return out;
}

// Where the walk of a heap segment stopped at damage, or nullopt when it reached the segment's end.
std::optional<Address> walk_stop_in(const ArenaInfo& arena, const HeapSegment& seg) {
  for (const WalkStop& stop : arena.walk_stops)
    if (stop.heap == seg.start) return stop.chunk;
  return std::nullopt;
}

std::uint64_t skipped_heap_bytes(const HeapModel& heap) {
  std::uint64_t bytes = 0;
  for (const ArenaInfo& arena : heap.arenas)
    for (const HeapSegment& seg : arena.heaps)
      if (const auto stop = walk_stop_in(arena, seg)) bytes += seg.end - std::clamp(*stop, seg.start, seg.end);
  return bytes;
}

void count_occupancy(const HeapModel& heap, OccupancyCounter& pages, OccupancyCounter& regions) {
  for (std::size_t a = 0; a < heap.arenas.size(); ++a)
    for (const HeapSegment& seg : heap.arenas[a].heaps) {
      auto [first, last] = blocks_in(heap, seg.start, seg.end);
      // The counted part of a heap ends where its top chunk starts, or where its walk stopped at damage:
      // the skipped part's blocks are unknown, and counting its pages as empty would invent fragmentation.
      Address end = (first < last && heap.blocks[last - 1].state == BlockState::top) ? heap.blocks[last - 1].chunk
                                                                                    : seg.end;
      if (const auto stop = walk_stop_in(heap.arenas[a], seg)) end = std::clamp(*stop, seg.start, end);
      pages.begin_range(seg.start, end);
      regions.begin_range(seg.start, end);
      for (std::size_t i = first; i < last; ++i) {
        const Block& b = heap.blocks[i];
        if (b.state != BlockState::in_use) continue;
        pages.add_live(b.chunk, chunk_end(b), static_cast<BlockId>(i));
        regions.add_live(b.chunk, chunk_end(b));
      }
      pages.end_range();
      regions.end_range();
    }
}

namespace {

struct TypeTally {
  std::uint64_t count = 0, bytes = 0;
  std::vector<BlockId> samples;
};

class TypeTallies {
 public:
  TypeTallies(TypeGroups& groups, const HeapModel& heap, std::size_t samples)
      : groups_(groups), heap_(heap), samples_(samples) {}

  void add(BlockId b) {
    TypeTally& t = by_group_[groups_.of(b)];
    ++t.count;
    t.bytes += heap_.blocks[b].usable_size();
    if (t.samples.size() < samples_) t.samples.push_back(b);
  }
  std::size_t size() const { return by_group_.size(); }

  // Rows by `most` (count or bytes), then name; at most `limit` (0: all), each with its samples' paths.
  template <typename Key>
  std::vector<FragmentationTypeRow> rows(Session& s, std::size_t limit, Key most) const {
    std::vector<std::pair<std::uint32_t, const TypeTally*>> order;
    for (const auto& [group, tally] : by_group_) order.emplace_back(group, &tally);
    std::sort(order.begin(), order.end(), [&](const auto& x, const auto& y) {
      if (most(*x.second) != most(*y.second)) return most(*x.second) > most(*y.second);
      return groups_.name(x.first) < groups_.name(y.first);
    });
    if (limit && order.size() > limit) order.resize(limit);
    std::vector<FragmentationTypeRow> out;
    for (const auto& [group, tally] : order) {
      FragmentationTypeRow row{groups_.name(group), tally->count, tally->bytes, {}};
      for (BlockId b : tally->samples) row.samples.push_back({block_ref(s, b), shortest_retainer_path(s, b)});
      out.push_back(std::move(row));
    }
    return out;
  }

 private:
  TypeGroups& groups_;
  const HeapModel& heap_;
  std::size_t samples_;
  std::unordered_map<std::uint32_t, TypeTally> by_group_;
};

}  // namespace

FragmentationReport build_fragmentation_report(Session& s, std::size_t type_rows, std::size_t samples,
                                               std::size_t max_blockers) {
  const HeapModel& heap = s.heap();
  const BlockTypes& types = s.types();
  PhaseTimer timer("fragmentation");
  TypeGroups groups(heap, types);

  FragmentationReport out;
  out.page_bytes = kFragmentationPageBytes;
  out.region_bytes = kFragmentationRegionBytes;
  out.warnings = s.warnings();
  if (!heap.complete) {
    out.partial = true;
    out.skipped_bytes = skipped_heap_bytes(heap);
    out.warnings.insert(out.warnings.begin(),
                        fmt::format("partial result: the heap walk skipped {} bytes of damaged or unreadable heap (run "
                                    "`verify` for details); their pages are not counted, and the arenas' byte totals "
                                    "and what trimming returns leave them out",
                                    out.skipped_bytes));
  }
  if (heap.trim) {
    out.trim_threshold = heap.trim->threshold;
    out.top_pad = heap.trim->pad;
  } else {
    out.warnings.push_back("the allocator's trim settings are unknown (no mp_): glibc's defaults are assumed");
  }
  const TrimSettings trim = heap.trim.value_or(kGlibcDefaultTrim);

  TypeTallies blockers(groups, heap, samples);
  for (std::size_t a = 0; a < heap.arenas.size(); ++a) {
    std::vector<BlockId> ids;
    ArenaFragmentation arena = arena_fragmentation(heap, a, trim, max_blockers, &ids);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      arena.blockers[i].block = block_ref(s, ids[i]);
      if (heap.blocks[ids[i]].state == BlockState::in_use) blockers.add(ids[i]);
    }
    out.arenas.push_back(std::move(arena));
  }

  TypeTallies sparse(groups, heap, samples);
  OccupancyCounter pages(kFragmentationPageBytes, [&](BlockId b) {
    ++out.sparse_blocks;
    out.sparse_bytes += heap.blocks[b].usable_size();
    sparse.add(b);
  });
  OccupancyCounter regions(kFragmentationRegionBytes);
  count_occupancy(heap, pages, regions);
  out.page_fill = pages.buckets();
  out.region_fill = regions.buckets();
  out.pages = pages.granules();
  out.regions = regions.granules();

  out.sparse_type_count = sparse.size();
  out.sparse_types = sparse.rows(s, type_rows, [](const TypeTally& t) { return t.count; });
  out.blocker_types = blockers.rows(s, type_rows, [](const TypeTally& t) { return t.bytes; });
  return out;
}

}  // namespace heapscope
