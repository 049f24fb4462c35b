#include "runtime/glibc/glibc_trim.h"

#include <algorithm>

namespace heapscope::glibc {

namespace {

// MINSIZE and sizeof(struct malloc_chunk) on x86-64.
constexpr std::uint64_t kMinChunkBytes = 32;
constexpr std::uint64_t kFreeChunkHeaderBytes = 48;

std::uint64_t align_down(std::uint64_t v, std::uint64_t to) { return v - v % to; }
std::uint64_t align_up(std::uint64_t v, std::uint64_t to) { return align_down(v + to - 1, to); }

bool coalescable(BlockState s) { return s == BlockState::free || s == BlockState::fastbin; }

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
    run_end = b.chunk_end();
  }
  close_run();
  return {madvised, top_start};
}

// Walks down from the top chunk of one segment: each in-use or tcache chunk is a blocker; freeing it and the
// blockers above lets top reach down through the free chunks beneath it.
void find_blockers(const HeapModel& heap, std::size_t first, std::size_t top, std::uint64_t page,
                   std::size_t max_blockers, ArenaTrim& out) {
  const Block& t = heap.blocks[top];
  const Address heap_end = t.chunk_end();
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
           heap.blocks[below - 1].chunk_end() == heap.blocks[below].chunk)
      --below;
    const Address new_top = below < i ? heap.blocks[below].chunk : b.chunk;
    out.blockers.push_back({static_cast<std::uint32_t>(i), heap_end - b.chunk,
                            trimmable_top_bytes(heap_end - new_top, 0, page) - now});
  }
}

}  // namespace

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

ArenaTrim arena_trim(const HeapModel& heap, std::size_t arena, const std::optional<TrimSettings>& settings,
                     std::size_t max_blockers, std::uint64_t page) {
  ArenaTrim out;
  if (!settings)
    out.warnings.push_back("the allocator's trim settings are unknown (no mp_): glibc's defaults are assumed");
  const TrimSettings trim = settings.value_or(kDefaultTrim);
  const ArenaInfo& info = heap.arenas[arena];
  const std::optional<std::size_t> top = heap.top_of(arena);
  for (const HeapSegment& seg : info.heaps) {
    const auto [first, last] = heap.blocks_between(seg.start, seg.end);
    const auto [madvised, top_start] = consolidated_pages(heap, first, last, page);
    out.explicit_madvised += madvised;
    if (!top || *top < first || *top >= last) continue;
    const Block& t = heap.blocks[*top];
    if (t.chunk_size() >= trim.threshold) out.on_free = trimmable_top_bytes(t.chunk_size(), trim.pad, page);
    // heap_trim unmaps a non-main arena's newest heap when top is all it holds.
    if (!info.is_main && first == *top && &seg != &info.heaps.front()) out.on_free = seg.end - seg.start;
    if (info.is_main) out.explicit_returned = trimmable_top_bytes(t.chunk_end() - top_start, 0, page);
    find_blockers(heap, first, *top, page, max_blockers, out);
  }
  return out;
}

}  // namespace heapscope::glibc
