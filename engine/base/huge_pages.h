// Transparent huge pages for large arrays that are written right after they are allocated (the heap's
// blocks, a scan's edges, per-block verdicts and indexes: megabytes each at millions of blocks).
//
// Debian's kernels hand out transparent huge pages only where a program asks ("madvise" mode). Unasked,
// each 4 KiB page of a fresh array costs a page fault: at 5M blocks `leaks` took 51,000 of them, 0.10 s of
// its 0.25 s in the kernel; asked, one fault maps 2 MiB (15,500 faults, 0.05 s). Pages are still resident
// only once written, but in 2 MiB steps: an array reserved large and filled in part holds up to 2 MiB more
// than it wrote until it is trimmed.
#pragma once

#include <cstddef>

namespace heapscope {

// From one huge page on, an array is worth asking for them.
inline constexpr std::size_t kHugePageArrayBytes = std::size_t{2} << 20;

// Asks the kernel to back the memory [p, p + bytes), not written yet, with huge pages where it can, when
// `bytes` is at least kHugePageArrayBytes. Advice only: a kernel without transparent huge pages, or with
// them turned off, goes on with small pages.
void advise_huge_pages(void* p, std::size_t bytes);

}  // namespace heapscope
