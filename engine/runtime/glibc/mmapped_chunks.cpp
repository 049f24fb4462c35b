#include "runtime/glibc/mmapped_chunks.h"

#include <algorithm>

namespace heapscope::glibc {

namespace {

constexpr std::uint64_t kPage = 4096;

bool overlaps(const std::vector<HeapSegment>& ranges, Address start, Address end) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), start,
                             [](Address a, const HeapSegment& s) { return a < s.start; });
  if (it != ranges.begin() && std::prev(it)->end > start) return true;
  return it != ranges.end() && it->start < end;
}

// The end of the range of `ranges` (sorted by start, disjoint) that contains `at`; 0 when none does.
Address end_of_range_containing(const std::vector<HeapSegment>& ranges, Address at) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), at, [](Address a, const HeapSegment& s) { return a < s.start; });
  return it != ranges.begin() && std::prev(it)->end > at ? std::prev(it)->end : 0;
}

// memalign() of a mapped chunk moves the header forward to the aligned spot and records the lead in
// prev_size; the original header at the mapping start stays. The aligned spot for alignment A (a power
// of two) is determined by the mapping start, so only log2(size) places need a look.
std::optional<Address> aligned_header(MemoryCursor& mem, Address map_start, std::uint64_t map_size) {
  for (std::uint64_t align = 32; align < map_size; align <<= 1) {
    const Address user = (map_start + 16 + align - 1) & ~(align - 1);
    const Address lead = user - 16 - map_start;
    if (lead == 0 || lead + kMinChunkSize > map_size) continue;
    const auto prev = mem.u64(map_start + lead);
    const auto size = mem.u64(map_start + lead + 8);
    if (prev && size && *prev == lead && *size == ((map_size - lead) | kIsMmapped)) return map_start + lead;
  }
  return std::nullopt;
}

// The end of the run of adjacent anonymous mappings that starts with regions[first]. mprotect on part of
// a mapping (guard pages, a read-only stretch) splits it into mappings with different permissions, so one
// mmapped chunk may span several.
Address anonymous_run_end(const std::vector<MemoryRegion>& regions, std::size_t first) {
  Address end = regions[first].end;
  for (std::size_t i = first + 1; i < regions.size() && regions[i].start == end && regions[i].backing_path.empty(); ++i)
    end = regions[i].end;
  return end;
}

}  // namespace

MmappedChunks find_mmapped_chunks(MemoryCursor& mem, const std::vector<HeapSegment>& exclude) {
  MmappedChunks out;
  const std::vector<MemoryRegion>& regions = mem.image().regions();
  Address found_end = 0;  // where the last chunk found ends: mappings before it belong to that chunk
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const MemoryRegion& r = regions[i];
    // The header's page may have been made read-only; it still tells the chunk's size.
    if (!r.readable || !r.bytes_present || !r.backing_path.empty()) continue;
    if ((r.start & (kPage - 1)) != 0) continue;
    const Address run_end = anonymous_run_end(regions, i);
    Address p = std::max(r.start, found_end);
    while (p + kPage <= r.end) {
      // No chunk of its own starts inside an arena heap or a stack: not read at all (a heap of a GB is a
      // quarter of a million pages, each faulted in by a look).
      if (const Address known_end = end_of_range_containing(exclude, p)) {
        p = (known_end + kPage - 1) & ~(kPage - 1);
        continue;
      }
      const auto prev = mem.u64(p);
      const auto size_field = mem.u64(p + 8);
      if (!prev || !size_field) break;
      const std::uint64_t size = *size_field & ~kFlagMask;
      const bool header = *prev == 0 && (*size_field & kFlagMask) == kIsMmapped && size >= kPage &&
                          (size & (kPage - 1)) == 0 && size <= run_end - p;
      if (!header || overlaps(exclude, p, p + size)) {
        p += kPage;  // merged neighbouring mappings: the next chunk, if any, starts on a page boundary
        continue;
      }
      const Address chunk = aligned_header(mem, p, size).value_or(p);
      Block b;
      b.chunk = chunk;
      b.size_units = static_cast<std::uint32_t>((size - (chunk - p)) / 16);
      b.state = BlockState::mmapped;
      b.arena = Block::kNoArena;
      out.blocks.push_back(b);
      out.mapped_bytes += size;
      p += size;
      found_end = p;
    }
  }
  return out;
}

}  // namespace heapscope::glibc
