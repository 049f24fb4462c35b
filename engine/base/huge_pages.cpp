#include "base/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace heapscope {

void advise_huge_pages(void* p, std::size_t bytes) {
  if (!p || bytes < kHugePageArrayBytes) return;
  // madvise takes whole pages: the partial ones at either end are advised too. Advice touches no data, and
  // a huge page needs its whole 2 MiB advised: an allocation mapped on its own (malloc's large ones) begins
  // on a 2 MiB boundary a few bytes before `p`, and leaving that first page out would cost the first 2 MiB.
  constexpr std::uintptr_t kPage = 4096;
  const auto begin = reinterpret_cast<std::uintptr_t>(p) & ~(kPage - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes + kPage - 1) & ~(kPage - 1);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace heapscope
