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

}  // namespace

MmappedChunks find_mmapped_chunks(MemoryCursor& mem, const std::vector<HeapSegment>& exclude) {
  MmappedChunks out;
  for (const MemoryRegion& r : mem.image().regions()) {
    if (!r.readable || !r.writable || !r.bytes_present || !r.backing_path.empty()) continue;
    if ((r.start & (kPage - 1)) != 0) continue;
    Address p = r.start;
    while (p + kPage <= r.end) {
      const auto prev = mem.u64(p);
      const auto size_field = mem.u64(p + 8);
      if (!prev || !size_field) break;
      const std::uint64_t size = *size_field & ~kFlagMask;
      const bool header = *prev == 0 && (*size_field & kFlagMask) == kIsMmapped && size >= kPage &&
                          (size & (kPage - 1)) == 0 && size <= r.end - p;
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
    }
  }
  return out;
}

}  // namespace heapscope::glibc
