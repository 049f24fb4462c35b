#include "queries/fragmentation.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "queries/block_refs.h"
#include "queries/retention_paths.h"
#include "types/type_groups.h"
#include "base/phase_timer.h"

namespace heapscope {

namespace {

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
  // A block of a granule or more does not pin a sparse granule: its pieces at either end are its own
  // placement (jemalloc starts a large block at a random cache line of its first page), not a small block
  // left among free ones.
  if (sparse_ && block != kNoBlock && end - start < granule_) current_blocks_.push_back(block);
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

ArenaFragmentation arena_fragmentation(const HeapModel& heap, std::size_t arena, const std::optional<ArenaTrim>& trim,
                                       std::vector<BlockId>* blocker_ids) {
  const ArenaInfo& info = heap.arenas[arena];
  ArenaFragmentation out;
  out.address = info.address;
  out.is_main = info.is_main;
  out.heaps = info.heaps.size();
  out.system_bytes = info.system_bytes;
  out.overhead_bytes = info.overhead_bytes;
  for (const HeapSegment& seg : info.heaps) {
    const auto [first, last] = heap.blocks_between(seg.start, seg.end);
    for (std::size_t i = first; i < last; ++i) add_state_bytes(out, heap.blocks[i]);
  }
  if (!trim) return out;
  out.trim_on_free = trim->on_free;
  out.malloc_trim_returned = trim->explicit_returned;
  out.malloc_trim_madvised = trim->explicit_madvised;
  for (const TrimBlockerEstimate& e : trim->blockers) {
    const Block& b = heap.blocks[e.block];
    TrimBlocker blocker;
    blocker.state = block_state_name(b.state);
    blocker.chunk = b.chunk;
    blocker.chunk_bytes = b.chunk_size();
    blocker.bytes_above = e.bytes_above;
    blocker.returnable_if_freed = e.returnable_if_freed;
    out.blockers.push_back(std::move(blocker));
    if (blocker_ids) blocker_ids->push_back(e.block);
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
      const auto [first, last] = heap.blocks_between(seg.start, seg.end);
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
        pages.add_live(b.chunk, b.chunk_end(), static_cast<BlockId>(i));
        regions.add_live(b.chunk, b.chunk_end());
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
  out.state_labels = heap.state_labels;
  out.terms = heap.terms;
  out.region_bytes = kFragmentationRegionBytes;
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
  }
  const LocatedAllocator& allocator = s.allocator();

  TypeTallies blockers(groups, heap, samples);
  bool any_trim = false;
  for (std::size_t a = 0; a < heap.arenas.size(); ++a) {
    std::vector<BlockId> ids;
    const std::optional<ArenaTrim> trim = allocator.arena_trim(heap, a, max_blockers, kFragmentationPageBytes);
    any_trim = any_trim || trim.has_value();
    if (trim)
      for (const std::string& w : trim->warnings)
        if (std::find(out.warnings.begin(), out.warnings.end(), w) == out.warnings.end()) out.warnings.push_back(w);
    ArenaFragmentation arena = arena_fragmentation(heap, a, trim, &ids);
    arena.trim_known = trim.has_value();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      arena.blockers[i].block = block_ref(s, ids[i]);
      if (heap.blocks[ids[i]].state == BlockState::in_use) blockers.add(ids[i]);
    }
    out.arenas.push_back(std::move(arena));
  }
  if (!any_trim)  // else the arenas without trimming rules say so one by one (trim_known)
    out.trim_unavailable = fmt::format("not available for {}: heapscope knows no trimming rules of it", allocator.name());

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

  out.size_classes = heap.size_classes;
  out.free_pages = heap.free_pages;
  out.sparse_type_count = sparse.size();
  out.sparse_types = sparse.rows(s, type_rows, [](const TypeTally& t) { return t.count; });
  out.blocker_types = blockers.rows(s, type_rows, [](const TypeTally& t) { return t.bytes; });
  return out;
}

}  // namespace heapscope
