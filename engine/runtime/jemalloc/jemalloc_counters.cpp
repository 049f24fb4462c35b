#include "runtime/jemalloc/jemalloc_counters.h"

#include <cstring>

namespace heapscope::jemalloc {

std::optional<OwnCounters> read_own_counters(const Image& image, const Runtime& rt,
                                             const std::vector<std::pair<std::uint32_t, Address>>& arenas) {
  const ArenaLayout& al = rt.layout->arena;
  OwnCounters c;
  constexpr std::size_t kLargeClasses = kSizeClasses - kSmallClasses;
  std::vector<std::uint8_t> large(kLargeClasses * al.large_stats_stride);
  for (const auto& [index, arena] : arenas) {
    // Small: each bin's regions handed out of its slabs (to threads' caches too), at the class's size.
    std::uint64_t bin_slot = 0;
    for (std::size_t i = 0; i < kSmallClasses; ++i) {
      for (std::uint32_t shard = 0; shard < rt.bins[i].shards; ++shard, ++bin_slot) {
        const Address bin = arena + al.bins + bin_slot * al.bin_stride;
        const auto regions = image.read_u64(bin + al.bin_current_regions);
        const auto slabs = image.read_u64(bin + al.bin_current_slabs);
        if (!regions || !slabs) return std::nullopt;
        c.allocated += *regions * rt.bins[i].region_size;
        c.slabs += *slabs;
      }
    }
    // Large: allocations less frees per class, at the class's size.
    if (!image.read_exact(arena + al.large_stats, large.data(), large.size())) return std::nullopt;
    for (std::size_t k = 0; k < kLargeClasses; ++k) {
      std::uint64_t allocations, frees;
      std::memcpy(&allocations, large.data() + k * al.large_stats_stride + al.large_stats_allocations, 8);
      std::memcpy(&frees, large.data() + k * al.large_stats_stride + al.large_stats_frees, 8);
      if (allocations >= frees) c.allocated += (allocations - frees) * rt.sizes[kSmallClasses + k];
    }
    const auto dirty = image.read_u64(arena + al.dirty_pages);
    const auto muzzy = image.read_u64(arena + al.muzzy_pages);
    const auto retained = image.read_u64(arena + al.retained_pages);
    if (!dirty || !muzzy || !retained) return std::nullopt;
    c.dirty_pages += *dirty;
    c.muzzy_pages += *muzzy;
    c.retained_pages += *retained;
  }
  return c;
}

}  // namespace heapscope::jemalloc
