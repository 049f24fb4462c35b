// The allocator-neutral result of walking a heap: every chunk as a compact Block, grouped into arenas.
// An allocator plug-in (engine/runtime/<allocator>/) fills a HeapModel; roots, graph and queries read it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "heap/block.h"
#include "heap/block_array.h"
#include "image/image.h"

namespace heapscope {

struct StateTotal {
  std::uint64_t blocks = 0;
  std::uint64_t bytes = 0;  // chunk bytes, headers included
  void add(std::uint64_t chunk_bytes) {
    ++blocks;
    bytes += chunk_bytes;
  }
  void remove(std::uint64_t chunk_bytes) {
    --blocks;
    bytes -= chunk_bytes;
  }
};
using StateTotals = std::array<StateTotal, kBlockStateCount>;
// Adds `more`'s blocks and bytes to `sum`, state by state.
inline void add_totals(StateTotals& sum, const StateTotals& more) {
  for (int s = 0; s < kBlockStateCount; ++s) {
    sum[s].blocks += more[s].blocks;
    sum[s].bytes += more[s].bytes;
  }
}

struct HeapSegment {  // one contiguous piece of an arena (the sbrk heap, or one heap_info heap)
  Address start = 0;
  Address end = 0;
};

// Where damage stopped the walk of one heap segment: the rest of that segment has no blocks.
struct WalkStop {
  Address heap = 0;       // the segment's start
  Address chunk = 0;      // the chunk the walk could not accept
  Address last_good = 0;  // the last chunk before it that was walked (0: none)
};

struct ArenaInfo {
  Address address = 0;             // the malloc_state
  bool is_main = false;
  std::vector<HeapSegment> heaps;  // in address order
  std::uint64_t system_bytes = 0;  // the arena's own system_mem counter
  std::uint64_t overhead_bytes = 0;  // heap_info/arena headers, alignment, fenceposts: not chunks
  StateTotals totals{};
  bool complete = true;            // false when the walk had to stop early (damage, missing memory)
  std::vector<WalkStop> walk_stops;  // heaps whose walk stopped at damage (heap verify reports them)
};

// How a structure was located: shown by `summary` so users can tell what rested on debug symbols.
struct Discovery {
  std::string structure;  // "main_arena", "mp_", "tcache", "arena", "heap", "mmapped chunks"
  Address address = 0;
  std::string method;     // "debug-symbol", "relocation", "scan", "tls-got", "arena-ring", ...
};

// glibc's mallinfo2() as the walk computes it (same field meanings); only glibc's walk has it.
struct MallInfo {
  std::uint64_t arena = 0, ordblks = 0, smblks = 0, hblks = 0, hblkhd = 0, usmblks = 0, fsmblks = 0,
                uordblks = 0, fordblks = 0, keepcost = 0;
};

// When an allocator gives memory at the top of a heap back to the system (glibc's systrim/heap_trim).
struct TrimSettings {
  std::uint64_t threshold = 0;  // free() trims only a top chunk at least this big
  std::uint64_t pad = 0;        // bytes of the top chunk trimming keeps
};

// One of the allocator's own figures beside the walk's count of the same thing (`summary` shows both; a
// difference says the walk and the allocator disagree, or the allocator's counters lag).
struct AllocatorFigure {
  std::string name;     // the allocator's name for it: "stats.allocated", "pageheap free bytes"
  std::string meaning;  // what it counts, and how the walk's count is made
  std::optional<std::uint64_t> own;   // read from the allocator's counters; absent when they cannot be read
  std::optional<std::uint64_t> walk;  // the walk's count; absent when the walk cannot count it
};

// One size class of a slab allocator (jemalloc's bins, tcmalloc's size classes): its slabs (spans) and how
// their objects are used, for `fragmentation`.
struct SizeClassUse {
  std::uint64_t object_bytes = 0;
  std::uint64_t slabs = 0, slab_bytes = 0;
  std::uint64_t in_use = 0, cached = 0, free = 0;  // objects by state
  std::uint64_t objects() const { return in_use + cached + free; }
};

// Free pages an allocator keeps for reuse, by kind (jemalloc's dirty and muzzy pages, tcmalloc's free and
// returned spans): already among the free blocks, counted apart for `fragmentation`.
struct FreePages {
  std::string kind;     // "dirty", "muzzy", "free spans", "returned spans"
  std::string meaning;  // what the allocator does with them
  std::uint64_t runs = 0, bytes = 0;
};

// What an allocator calls each block state (summary's column headings), empty for a state it never
// produces. glibc's names by default.
using StateLabels = std::array<std::string, kBlockStateCount>;
inline StateLabels glibc_state_labels() { return {"in use", "mmapped", "free (bins)", "tcache", "fastbins", "top"}; }
// A state's label where a table or a list names the states side by side: glibc's free chunks are "bins".
inline std::string state_heading(const std::string& label) { return label == "free (bins)" ? "bins" : label; }

// `word` with its first letter in capitals (a heading made of an allocator's word).
inline std::string capitalized(std::string word) {
  if (!word.empty() && word[0] >= 'a' && word[0] <= 'z') word[0] = static_cast<char>(word[0] - 'a' + 'A');
  return word;
}

// What an allocator calls its arenas, their pieces, its slabs and its cached objects where a table or a
// heading names them (fragmentation): glibc's words by default, which tcmalloc and jemalloc share.
struct AllocatorTerms {
  std::string arena = "arena";    // a row of the arena table (mimalloc: a thread's segments)
  std::string heaps = "heaps";    // an arena's contiguous pieces (mimalloc: segments)
  std::string slab = "slab";      // memory carved into objects of one size class (mimalloc: a page)
  std::string cached = "cached";  // objects in the tcache state, and what that means
  std::string cached_meaning = "cached ones are free to their thread";
  bool operator==(const AllocatorTerms&) const = default;
  // "Slab utilisation per size class": fragmentation's heading of its size classes.
  std::string size_class_heading() const { return capitalized(slab) + " utilisation per size class"; }
};

// A garbage collector's own rules of reachability for its heap (a collector beside malloc: Boehm GC). Its
// objects are reached only from the collector's roots and from the objects it scans; a pointer from the
// malloc heap or from memory nobody registered keeps nothing of it alive, and the next collection frees
// what those rules leave unreached. The collector's words, in neutral terms:
struct CollectorRules {
  std::string name;         // "Boehm GC"
  // The unit it gives back to its free pages: a page none of whose objects survive (Boehm: a heap block).
  std::uint32_t page_bytes = 4096;
  std::uint16_t arena = 0;  // the collector's arena in HeapModel::arenas
  // Whether the data of every module is a root (Boehm: GC_no_dls unset), besides the registered ranges.
  bool module_data_roots = true;
  // Whether a pointer into an object's interior keeps it alive from anywhere (GC_all_interior_pointers).
  // When not, only the displacements in `valid_offsets` do from the heap and from static roots; a thread's
  // stack and registers keep an object alive by any pointer into it.
  bool interior_pointers = true;
  // Whether anonymous memory counts as a root: the heap holds objects whose kind the collector marks
  // through the program's own procedure, which may mark memory outside the heap (guile's threads mark
  // their VM stacks, anonymous mappings) and says nowhere which.
  bool anonymous_roots = false;
  std::vector<std::uint16_t> valid_offsets;  // ascending, 0 first; when interior_pointers is off
  std::vector<HeapSegment> registered_roots;  // ranges the program registered as roots (GC_add_roots)
  std::vector<HeapSegment> excluded_roots;    // ranges excluded from every root (GC_exclude_static_roots)
  // The collector's own code: a thread started there is the collector's (a parallel marker), and its stack,
  // which holds the collector's scratch (a marker's mark stack), is none of its roots.
  HeapSegment code;
};

// The blocks one arena heap segment holds: [first, last) of the block array.
struct SegmentBlocks {
  HeapSegment segment;
  std::size_t first = 0, last = 0;
};

// A frame of an interpreter's own stack (a Python function's, in CPython's data stack): memory that is no
// heap, a root owned by the thread running the frame, whose words the interpreter names.
struct InterpreterFrame {
  struct Local {
    Address at = 0;    // one word
    std::string name;  // what it is in the frame: "local cache", "globals", "function"
  };
  std::uint32_t tid = 0;    // the thread running it (the system's id); 0 when the interpreter does not say
  std::string function;     // "handle" ("Server.handle": the qualified name)
  std::string file;         // "app.py"
  std::uint32_t line = 0;   // where it is (0: unknown)
  Address start = 0, end = 0;  // the frame's words: its header, its locals, its value stack
  std::vector<Local> locals;   // its named words, in address order: the references it holds, its locals
};

struct HeapModel {
  std::string allocator;       // "glibc", "tcmalloc"
  std::string version;         // the allocator's release ("2.36", "2.10"), or empty when unknown
  BlockArray blocks;           // sorted by chunk address
  std::vector<ArenaInfo> arenas;
  // Allocator structures outside the heap (main_arena, mp_; tcmalloc's page map leaves and thread caches):
  // never roots, since their bin and top pointers aim at chunk headers, which lie inside the previous
  // block's last word, and free-list pointers at free blocks.
  std::vector<HeapSegment> metadata;
  // Address space the allocator keeps without memory (jemalloc's retained extents): its own, holding no
  // blocks and no data, so neither a root nor "outside malloc"; sorted by address.
  std::vector<HeapSegment> reserved;
  // Memory a runtime says holds no references though it is no heap (an interpreter's cache of borrowed
  // pointers, its stack's spent slots): never roots; sorted by address.
  std::vector<HeapSegment> not_roots;
  // An interpreter's frames in memory that is no heap (runtime/cpython/cpython_frames.h): roots owned by their
  // threads, each word named by its frame and local.
  std::vector<InterpreterFrame> interpreter_frames;
  StateTotal mmapped_total;    // mapping bytes (alignment lead included), what mallinfo2's hblkhd counts
  StateTotal mmapped_chunks;   // the same blocks in chunk bytes, as every other state is counted
  std::vector<Discovery> discovery;
  std::vector<std::string> warnings;
  std::optional<MallInfo> mallinfo;
  StateLabels state_labels = glibc_state_labels();
  AllocatorTerms terms;
  std::vector<AllocatorFigure> figures;  // the allocator's own counters beside the walk's (summary)
  std::vector<SizeClassUse> size_classes;  // slab allocators only, smallest objects first
  std::vector<FreePages> free_pages;       // likewise
  // The allocator's trimming settings (glibc: mp_.trim_threshold, mp_.top_pad); absent when unknown.
  std::optional<TrimSettings> trim;
  // The collector's rules when the model holds a garbage-collected heap (its blocks then reached by them).
  std::optional<CollectorRules> collector;
  bool complete = true;

  StateTotals totals() const;
  // The block whose chunk contains addr (header or user bytes), or null. O(log n).
  const Block* block_containing(Address addr) const;
  // The blocks [first, last) whose chunks start in [start, end) (a heap segment's). O(log n).
  std::pair<std::size_t, std::size_t> blocks_between(Address start, Address end) const;
  // Every arena heap segment that holds blocks, with them, in address order, none overlapping the one
  // before (a segment's blocks already in the one before are not its). The blocks between are outside every
  // segment: mappings of their own (glibc's mmapped chunks, musl's lone groups). O(segments log n).
  std::vector<SegmentBlocks> blocks_by_segment() const;
  // The index of arena `arena`'s top chunk, or nothing when the walk found none.
  std::optional<std::size_t> top_of(std::size_t arena) const;
};

}  // namespace heapscope
