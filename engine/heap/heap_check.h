// What an allocator's consistency check (`verify`) found, in allocator-neutral terms: each plug-in checks
// its own structures (runtime/<allocator>/) and reports findings in this shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heap/heap_model.h"

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
  // What was checked in the words of an allocator whose structures are not glibc's arenas, heaps, chunks
  // and lists, a line each ("Boehm GC: 1 heap of 16 sections, 145 heap blocks, ..."). A collector beside
  // glibc's malloc adds its line after glibc's; a malloc that is not glibc's (mimalloc) puts its counts in
  // `checked` for JSON and says them here instead of glibc's line (counts_in_glibc_words false).
  std::vector<std::string> checked_in_own_words;
  bool counts_in_glibc_words = true;
  std::string object_word = "chunk";   // what a finding's address is ("chunk" for glibc, "block")
};

}  // namespace heapscope
