#include "heap/heap_model.h"

#include <algorithm>

namespace heapscope {

StateTotals HeapModel::totals() const {
  StateTotals sum{};
  for (const ArenaInfo& a : arenas) add_totals(sum, a.totals);
  sum[static_cast<int>(BlockState::mmapped)] = mmapped_chunks;
  return sum;
}

const Block* HeapModel::block_containing(Address addr) const {
  auto it = std::upper_bound(blocks.begin(), blocks.end(), addr,
                             [](Address a, const Block& b) { return a < b.chunk; });
  if (it == blocks.begin()) return nullptr;
  --it;
  return addr < it->chunk + it->chunk_size() ? &*it : nullptr;
}

std::pair<std::size_t, std::size_t> HeapModel::blocks_between(Address start, Address end) const {
  const Block* begin = blocks.begin();
  const auto by_chunk = [](const Block& b, Address a) { return b.chunk < a; };
  const Block* lo = std::lower_bound(begin, blocks.end(), start, by_chunk);
  const Block* hi = std::lower_bound(lo, blocks.end(), end, by_chunk);
  return {static_cast<std::size_t>(lo - begin), static_cast<std::size_t>(hi - begin)};
}

std::vector<SegmentBlocks> HeapModel::blocks_by_segment() const {
  std::vector<HeapSegment> segments;
  for (const ArenaInfo& a : arenas) segments.insert(segments.end(), a.heaps.begin(), a.heaps.end());
  std::sort(segments.begin(), segments.end(), [](auto& x, auto& y) { return x.start < y.start; });
  std::vector<SegmentBlocks> out;
  std::size_t taken = 0;  // the blocks before this one are another segment's, or outside every one
  for (const HeapSegment& seg : segments) {
    auto [first, last] = blocks_between(seg.start, seg.end);
    first = std::max(first, taken);
    if (first >= last) continue;
    out.push_back({seg, first, last});
    taken = last;
  }
  return out;
}

std::optional<std::size_t> HeapModel::top_of(std::size_t arena) const {
  for (const HeapSegment& seg : arenas[arena].heaps) {
    const auto [first, last] = blocks_between(seg.start, seg.end);
    if (first < last && blocks[last - 1].state == BlockState::top) return last - 1;
  }
  return std::nullopt;
}

}  // namespace heapscope
