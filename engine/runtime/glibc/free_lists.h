// glibc's free lists that keep chunks looking "in use" to the chunk walk: every thread's tcache and each
// arena's fastbins. Their members must be found by following the lists (safe-linked since glibc 2.32).
#pragma once

#include <atomic>

#include <string>
#include <vector>

#include "runtime/glibc/glibc_layout.h"
#include "image/image.h"

namespace heapscope::glibc {

struct FreeListMembers {
  std::vector<Address> chunks;  // chunk addresses (header), unordered
  std::vector<std::string> warnings;
};

// Chunks in the tcache at `tcache` (a tcache_perthread_struct), following each bin for at most its count.
FreeListMembers tcache_members(const Image& image, const Layout& layout, Address tcache, std::uint32_t tid);

// Chunks in the fastbins of the arena at `arena`. `max_chunks` bounds a damaged (cyclic) list.
FreeListMembers fastbin_members(const Image& image, const Layout& layout, Address arena, std::size_t max_chunks);

// Number of chunks on the arena's regular bins (unsorted, small, large), or nullopt when a list is
// damaged (unreadable link, or longer than `max_chunks`). `max_chunks` is read at every chunk: the walk
// that runs beside the count lowers it to the heap's block count once it knows it.
std::optional<std::uint64_t> regular_bin_count(const Image& image, const Layout& layout, Address arena,
                                               const std::atomic<std::size_t>& max_chunks);

}  // namespace heapscope::glibc
