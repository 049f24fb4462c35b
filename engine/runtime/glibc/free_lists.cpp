#include "runtime/glibc/free_lists.h"

#include <fmt/format.h>

#include "base/progress.h"

namespace heapscope::glibc {

FreeListMembers tcache_members(const Image& image, const Layout& layout, Address tcache, std::uint32_t tid) {
  FreeListMembers out;
  const std::size_t count_width = layout.tcache_counts_u16 ? 2 : 1;
  for (int bin = 0; bin < layout.tcache_bin_count; ++bin) {
    std::uint16_t count = 0;
    if (image.read(tcache + bin * count_width, &count, count_width) != count_width) {
      out.warnings.push_back(fmt::format("tcache of thread {} at 0x{:x} cannot be read", tid, tcache));
      return out;
    }
    const Address head_slot = tcache + layout.tcache_entries_offset() + bin * 8;
    auto entry = image.read_u64(head_slot);  // entries[] heads are plain pointers to user memory
    std::uint32_t seen = 0;
    while (entry && *entry != 0 && seen < count) {
      const Address user = *entry;
      if (user & 15) {
        out.warnings.push_back(fmt::format("tcache of thread {}: bin {} holds misaligned entry 0x{:x}; the "
                                           "rest of that bin is skipped", tid, bin, user));
        break;
      }
      out.chunks.push_back(user - 16);
      ++seen;
      const auto stored = image.read_u64(user);
      if (!stored) break;
      entry = reveal_pointer(layout, user, *stored);
    }
    if (seen < count)
      out.warnings.push_back(fmt::format("tcache of thread {}: bin {} should hold {} chunks, {} were found",
                                         tid, bin, count, seen));
  }
  return out;
}

FreeListMembers fastbin_members(const Image& image, const Layout& layout, Address arena, std::size_t max_chunks) {
  FreeListMembers out;
  for (int bin = 0; bin < layout.arena.fastbin_count; ++bin) {
    auto chunk = image.read_u64(arena + layout.arena.fastbins + bin * 8);
    std::size_t n = 0;
    while (chunk && *chunk != 0) {
      if ((*chunk & 15) || ++n > max_chunks) {
        out.warnings.push_back(fmt::format("fastbin {} of arena 0x{:x} is damaged at 0x{:x} (misaligned or "
                                           "cyclic); the rest of it is skipped", bin, arena, *chunk));
        break;
      }
      out.chunks.push_back(*chunk);
      const auto stored = image.read_u64(*chunk + 16);
      if (!stored) break;
      chunk = reveal_pointer(layout, *chunk + 16, *stored);
    }
  }
  return out;
}

std::optional<std::uint64_t> regular_bin_count(const Image& image, const Layout& layout, Address arena,
                                               const std::atomic<std::size_t>& max_chunks) {
  std::uint64_t total = 0;
  for (int bin = 1; bin < layout.arena.bin_count; ++bin) {
    const Address head = layout.bin_at(arena, bin);
    auto p = image.read_u64(head + 16);
    while (p && *p != head) {
      if (++total > max_chunks.load(std::memory_order_relaxed)) return std::nullopt;
      if ((total & 0xffff) == 0) progress_check();  // millions of chunks on a large heap's unsorted bin
      p = image.read_u64(*p + 16);
    }
    if (!p) return std::nullopt;
  }
  return total;
}

}  // namespace heapscope::glibc
