// `heap verify`: a consistency check of glibc malloc's own structures, for heaps the program may have
// damaged (overflows, double frees, writes after free). It starts from what the walker found (the
// HeapModel: arenas, heap segments, blocks, where damage stopped a walk) and checks what the walker
// trusts: chunk headers against their neighbours and the free lists, every bin, fastbin and tcache list
// link by link, top chunks and heap_info headers. It only reads the image.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heap/glibc/glibc_runtime.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope {

// One problem found in the allocator's structures.
struct HeapFinding {
  std::string kind;        // chunk_header, top, heap_info, prev_size, unmerged_free, prev_inuse, bin_link,
                           // bin_size, list_loop, fastbin_link, fastbin_size, tcache_link, tcache_size,
                           // tcache_count, tcache_struct, double_free (docs/robustness.md)
  Address chunk = 0;       // the damaged chunk's header; a heap_info, arena or tcache for those kinds;
                           // 0 when the damage is in a list head (see `where`)
  std::string expected;
  std::string found;
  Address last_good = 0;   // the last good chunk before it, in its heap or on its list (0: none)
  Address arena = 0;       // the malloc_state the structure belongs to (0: a thread's tcache)
  Address heap = 0;        // start of the heap segment holding the chunk (0: not in a walked heap)
  std::string where;       // "heap", or the list: "tcache bin 3 (64-byte chunks) of thread 1234", ...
  std::string affects;     // which analyses the damage makes partial or uncertain
};

// What was checked, so a clean result says how much it covers.
struct HeapCheckCounts {
  std::uint64_t arenas = 0;
  std::uint64_t heaps = 0;
  std::uint64_t chunks = 0;
  std::uint64_t bin_entries = 0;
  std::uint64_t fastbin_entries = 0;
  std::uint64_t tcaches = 0;
  std::uint64_t tcache_entries = 0;
};

struct HeapVerification {
  std::vector<HeapFinding> findings;   // in the order checked: arenas' heaps, chunks, bins, fastbins, tcaches
  std::uint64_t findings_dropped = 0;  // beyond the listing bound, on heaps full of garbage
  HeapCheckCounts checked;
  std::vector<std::string> notes;      // what could not be checked, and why
};

namespace glibc {

// Checks the glibc heap `model` was walked from. Bounded in time and memory on any input: every list walk
// stops at a repeated chunk or after as many steps as the model has blocks.
HeapVerification verify_heap(const Image& image, const SymbolIndex& symbols, const HeapModel& model);

// The same with malloc's globals already located (unit tests build the Runtime by hand).
HeapVerification verify_heap(const Image& image, const Runtime& runtime, const HeapModel& model);

}  // namespace glibc
}  // namespace heapscope
