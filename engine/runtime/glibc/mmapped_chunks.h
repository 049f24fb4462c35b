// Chunks that malloc placed in mappings of their own. glibc keeps no list of them, only a count
// (mp_.n_mmaps), so they are found by looking at the start of anonymous mappings for a chunk header
// with IS_MMAPPED set whose size fills the mapping — or a run of adjacent anonymous mappings, since
// mprotect on part of a chunk (guard pages, a read-only stretch) splits its mapping.
#pragma once

#include <vector>

#include "runtime/glibc/glibc_layout.h"
#include "heap/heap_model.h"
#include "image/memory_cursor.h"

namespace heapscope::glibc {

struct MmappedChunks {
  std::vector<Block> blocks;     // in address order, state mmapped
  std::uint64_t mapped_bytes = 0;  // whole mappings (alignment lead of memalign'ed chunks included)
};

// `exclude` are ranges known to be something else (arena heaps, thread stacks); sorted by start.
MmappedChunks find_mmapped_chunks(MemoryCursor& mem, const std::vector<HeapSegment>& exclude);

}  // namespace heapscope::glibc
