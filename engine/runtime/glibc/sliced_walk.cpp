#include "runtime/glibc/sliced_walk.h"

#include <algorithm>

namespace heapscope::glibc {

namespace {

constexpr std::uint64_t kIsMmapped = 2;
constexpr std::uint64_t kNonMainArena = 4;
constexpr int kPlausibleRun = 16;

// Whether kPlausibleRun chunks in a row from `c` look like a heap's: sizes that fit, no IS_MMAPPED bit, one
// NON_MAIN_ARENA bit for all, and each free chunk's size repeated in its successor's prev_size (glibc keeps
// that for every free chunk). Reaching `top` or the heap's end early is plausible too.
bool plausible_run(MemoryCursor& mem, Address c, Address end, Address top) {
  std::uint64_t arena_bit = 0;
  for (int i = 0; i < kPlausibleRun; ++i) {
    if (c == top) return i > 0;
    const auto field = mem.u64(c + 8);
    if (!field) return false;
    const std::uint64_t size = *field & ~kFlagMask;
    if (size < kMinChunkSize || (size & 15) || size > end - c || (*field & kIsMmapped)) return false;
    if (i == 0) arena_bit = *field & kNonMainArena;
    else if ((*field & kNonMainArena) != arena_bit) return false;
    const Address next = c + size;
    if (next + 16 > end) return i > 0;
    const auto next_field = mem.u64(next + 8);
    if (!next_field) return false;
    if (!(*next_field & kPrevInUse) && mem.u64(next).value_or(0) != size) return false;
    c = next;
  }
  return true;
}

// The joined walk goes on with the next slice's walk: its counts, its warnings, and how it ended.
void continue_with(SegmentWalk& joined, SegmentWalk&& part) {
  add_totals(joined.totals, part.totals);
  joined.overhead_bytes += part.overhead_bytes;
  joined.reached_end = part.reached_end;
  joined.next_chunk = part.next_chunk;
  if (part.stopped_at) {
    joined.stopped_at = part.stopped_at;
    joined.last_good = part.last_good;
  }
  joined.warnings.insert(joined.warnings.end(), std::make_move_iterator(part.warnings.begin()),
                         std::make_move_iterator(part.warnings.end()));
}

}  // namespace

std::vector<HeapSlice> slices_of(Address first_chunk, Address end, unsigned workers, std::uint64_t slice_bytes) {
  const std::uint64_t bytes = end > first_chunk ? end - first_chunk : 0;
  if (workers <= 1 || slice_bytes == 0 || bytes < 2 * slice_bytes) return {{first_chunk, 0}};
  const std::uint64_t count = std::min<std::uint64_t>(std::uint64_t{workers} * 4, bytes / slice_bytes);
  std::vector<HeapSlice> slices;
  for (std::uint64_t i = 0; i < count; ++i) {
    const Address start = i == 0 ? first_chunk : (first_chunk + bytes * i / count) & ~Address{15};
    slices.push_back({start, 0});
    if (i > 0) slices[i - 1].limit = start;
  }
  return slices;
}

Address likely_chunk_start(MemoryCursor& mem, Address from, Address end, std::uint64_t search_bytes) {
  const Address stop = end - from > search_bytes ? from + search_bytes : end;
  for (Address c = (from + 15) & ~Address{15}; c + 16 <= stop; c += 16)
    if (plausible_run(mem, c, end, 0)) return c;
  return 0;
}

void walk_slice(MemoryCursor& mem, SliceWalk& walk, std::size_t index, Address end, Address top,
                std::uint16_t arena) {
  walk.sink.count = 0;
  const Address limit = walk.slice.limit ? walk.slice.limit : end;
  const Address from = index == 0 ? walk.slice.start : likely_chunk_start(mem, walk.slice.start, limit);
  walk.result = from ? walk_segment(mem, from, end, top, arena, walk.sink, walk.slice.limit) : SegmentWalk{};
}

SegmentWalk join_slices(MemoryCursor& mem, const std::vector<SliceWalk*>& slices, Address end, Address top,
                        std::uint16_t arena) {
  SegmentWalk joined = std::move(slices.front()->result);
  slices.front()->skip = 0;
  std::size_t kept = slices.front()->sink.count;
  for (std::size_t i = 1; i < slices.size(); ++i) {
    SliceWalk& walk = *slices[i];
    walk.skip = 0;
    const Address entry = joined.next_chunk;  // where the true walk enters this slice (0: it ended before)
    if (!entry) {
      walk.sink.count = 0;
      continue;
    }
    const Block* blocks = walk.sink.data;
    const Block* met = std::lower_bound(blocks, blocks + walk.sink.count, entry,
                                        [](const Block& b, Address a) { return b.chunk < a; });
    if (met != blocks + walk.sink.count && met->chunk == entry) {
      walk.skip = static_cast<std::size_t>(met - blocks);
      for (const Block* b = blocks; b != met; ++b)  // the guess's own chunks before the meeting: not the heap's
        walk.result.totals[static_cast<int>(b->state)].remove(b->chunk_size());
    } else {
      walk.sink.count = 0;
      walk.result = walk_segment(mem, entry, end, top, arena, walk.sink, walk.slice.limit);
    }
    kept += walk.sink.count - walk.skip;
    continue_with(joined, std::move(walk.result));
  }
  joined.blocks = kept;
  joined.next_chunk = 0;
  return joined;
}

}  // namespace heapscope::glibc
