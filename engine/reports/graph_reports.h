// Reports of the reference-graph commands: leaks, retainers, refs, describe, histogram.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "reports/naming_share.h"
#include "reports/sites_note.h"

namespace heapscope {

struct BlockRef {
  Address address = 0;     // user pointer
  std::uint64_t size = 0;  // usable bytes
  std::string type;        // an inferred name carries its mark ("AuditRecord?")
  std::string naming;      // the evidence behind `type`: dwarf, symbol, rtti, vtable, pattern, inferred, content, none
};

struct RootRef {
  std::string kind;   // root_kind_name()
  std::string label;  // "global g_cache in app", "register rbx, thread 1 (tid 42)"
  Address address = 0;  // the word holding the pointer (0 for registers)
  std::string field;    // DWARF: the member of the global variable holding it (".clients[3]"), or empty
};

// One frame of an allocation stack the allocator recorded, symbolized (frames/unwind.h, Frame).
struct SiteFrame {
  Address pc = 0;         // the return address as recorded
  std::string function;   // demangled; empty when unknown
  std::string file;       // source file (DWARF), empty when unknown
  int line = 0;
  std::string module_offset;  // "libfoo.so+0x1234" when no symbol covers pc
  std::string text;       // "make_sessions() at sites.c:31"
};

// Where a block was allocated: its allocation site, from the allocator's own sampling (model/provenance.h).
struct AllocatedAt {
  std::uint32_t site = 0;         // the site's index in the session's sites (most bytes first)
  std::vector<SiteFrame> frames;  // the program's frames, innermost first (all, or the top few)
  std::size_t more_frames = 0;    // frames left out of `frames`
  std::vector<Address> stack;     // every return address as the allocator recorded it (its own frames too)
  std::uint64_t requested = 0;    // bytes asked for, when recorded
};

struct LeakGroup {
  std::string type;
  std::string naming;      // as BlockRef::naming
  std::uint64_t size = 0;  // usable bytes of each block
  std::uint64_t count = 0, bytes = 0, direct = 0, indirect = 0, cycle = 0;
  std::vector<Address> examples;
  std::vector<std::string> example_texts;  // per example: the text it starts with (escaped), or empty
  // By site: the site's frames (empty for the group of leaked blocks that have none) and, when sampled
  // at a rate, what its sampled blocks stand for.
  std::optional<AllocatedAt> site;
  double estimated_count = 0, estimated_bytes = 0;
};


struct LeaksReport {
  std::string by = "type";        // "type" (and size) or "site"
  std::optional<SitesNote> sites;  // by site
  std::vector<LeakGroup> groups;  // by bytes, largest first
  std::vector<NamingShare> named;  // the leaked blocks per evidence, most reliable first (none last)
  StateTotal leaked, direct, indirect, cycle, possibly;  // bytes are usable bytes
  // Some heap, stack or writable memory could not be read: leaks there are missed, and blocks only it
  // points to are reported (the first warnings say what is missing).
  bool partial = false;
  // Modules whose file could not be used: blocks they type and globals they name stay unnamed (said
  // first: the verdicts do not depend on it, since their memory is scanned all the same).
  std::vector<std::string> modules_without_symbols;
  // A runtime's object header recognised (runtime/object_headers.h): pointers just past it counted as
  // pointers to the block ("CPython PyGC_Head (16 bytes before each GC-tracked object)"); empty when none.
  std::string object_headers;
  std::uint64_t object_header_blocks = 0;
  std::uint64_t graph_edges = 0;  // pointers between blocks the scan found (what the graph's size is made of)
  // The blocks reachable only through an interior-pointer idiom (model/interior_idioms.h; valgrind's
  // "reachable via heuristic"), by idiom (and offset, for length-prefixed and fixed-offset ones), most
  // bytes first.
  struct IdiomTotal {
    std::string idiom;        // memcheck's name, or heapscope's: "length-prefixed", "fixed-offset", "pool"
    std::uint32_t offset = 0;  // where the pointers land (length-prefixed; fixed-offset up to 1016); 0 otherwise
    StateTotal total;
  };
  std::vector<IdiomTotal> held_by_idioms;
  StateTotal in_use;  // every allocated block (chunk bytes): what "possibly leaked" is a share of
  // A garbage collector's heap (HeapModel::collector): the objects its rules leave unreached, which its next
  // collection frees — garbage, not leaks, so counted apart from them (an uncollectable object nothing
  // reaches is a leak) and grouped the same way. Absent without a collector.
  struct Collectable {
    std::string collector;  // "Boehm GC"
    StateTotal total;       // usable bytes
    // The bytes of its pages that hold such objects and nothing it keeps: what the collection gives back
    // to its free pages whole (Boehm: what GC_get_free_bytes() grows by).
    std::uint64_t whole_page_bytes = 0;
    std::vector<LeakGroup> groups;  // by bytes, largest first
  };
  std::optional<Collectable> collectable;
  std::vector<std::string> warnings;
};

// What "possibly leaked" means, for a report where it is a large share of the heap (a tenth or more);
// empty otherwise.
inline std::string possibly_explanation(const LeaksReport& r) {
  if (r.in_use.bytes == 0 || r.possibly.bytes * 10 < r.in_use.bytes) return {};
  return "These blocks are reachable, but only through pointers into their middle, never to their start (as "
         "valgrind's \"possibly lost\"): a program that keeps pointers past a header of its own, or a leak whose "
         "last pointer is a stray interior one. `blocks --state possibly` lists them, `retainers ADDR` shows the "
         "pointers; --leak-check-heuristics says which known idioms count as pointers to the start.";
}

// What the bytes a leaks report counts are: usable bytes, where valgrind and LeakSanitizer count the bytes
// the program asked for (a 24-byte request is a 24-byte block to glibc, a 32-byte one to jemalloc).
inline constexpr const char* kLeakBytesLegend =
    "Bytes are usable sizes (what the allocator gave each block); valgrind counts the sizes "
    "asked for, so their totals are smaller for the same blocks.";

// "length-prefixed +3", "fixed-offset +8", "stdstring": an idiom's group, as reports name it.
inline std::string idiom_group_name(const LeaksReport::IdiomTotal& t) {
  return t.offset ? t.idiom + " +" + std::to_string(t.offset) : t.idiom;
}

// What a leaks report with no groups says: "no leaks" only when nothing was missing.
inline const char* no_leaks_sentence(const LeaksReport& r) {
  return r.partial ? "No leaks found in the memory that could be read (a partial result: see the warnings)."
                   : "No leaks: every allocated block is reachable from a root.";
}

struct PathStep {
  BlockRef block;
  std::optional<std::uint64_t> offset;  // where in this block the pointer to the next step sits
  std::string field;                    // DWARF: the field at that offset (".next", "[17]"), or empty
  std::uint64_t retained = 0;           // usable bytes this block alone keeps alive (dominator tree)
  std::uint64_t into = 0;               // how far into this block the pointer reaching it points (0: its start)
};

struct RetainerPath {
  RootRef root;
  std::vector<PathStep> steps;  // from the root's first block to the target
};

struct RetainersReport {
  Address query = 0;
  BlockRef target;
  std::optional<AllocatedAt> allocated_at;  // the target's allocation site, when sampled
  std::string verdict;
  std::vector<RetainerPath> paths;
  bool depth_limited = false;  // the search stopped at --max-depth before finding all asked-for paths
  std::vector<std::string> warnings;
};

struct Referrer {
  std::optional<BlockRef> block;  // a heap block holding the pointer...
  std::uint64_t offset = 0;       // ...at this offset
  std::string field;              // the block's field there (a runtime's name: `["orders"]`, `[3]`), or empty
  std::optional<RootRef> root;    // or a root
  std::uint64_t into = 0;         // how far into the target the pointer lands (0: its start)
};

struct RefsReport {
  Address query = 0;
  BlockRef target;
  std::vector<Referrer> referrers;
  std::vector<std::string> warnings;
};

struct PointerSlot {
  std::uint64_t offset = 0;
  Address value = 0;
  std::string points_to;  // "block 0x… (Node, 24 bytes)", "global g in app", "stack of thread 2"
  std::string field;      // the block's field there (a runtime's name: `["orders"]`, `[3]`), or empty
};

// One field of a DWARF-typed block, like a line of gdb's `print *p`.
struct FieldRow {
  std::string path;   // from the block's start: ".next", ".series.count", "[3].name", "<base Node>" (a group)
  std::string label;  // the path's last step (".count", "[3]"), for indented text
  std::string type;   // "node*", "unsigned int", "char[8]"
  std::uint64_t offset = 0;  // from the block's start
  std::string value;         // "42", "0x55d0c0a012a0", "\"sensor\"", "2.5", "true"; empty for a structure,
                             // array or base-class group, whose fields follow one level deeper
  std::string points_to;     // a pointer's target, named as PointerSlot::points_to; empty otherwise
  std::uint32_t depth = 0;   // nesting, for indentation
};

struct DescribeReport {
  Address query = 0;
  BlockRef block;
  Address chunk = 0;
  std::uint64_t chunk_size = 0;
  std::string state;
  std::string text;   // the text the block starts with (escaped, cut short), or empty
  Address arena = 0;  // 0 for mmapped
  std::string verdict;
  bool possibly = false;
  Address dump_address = 0;
  std::vector<std::uint8_t> dump;  // the block's first bytes
  std::vector<PointerSlot> pointers;
  std::string fields_type;        // the DWARF type the block is read as ("node", "record[24576]"); empty: untyped
  std::vector<FieldRow> fields;   // at most --fields N of them
  bool fields_truncated = false;  // the type has more fields than were shown
  std::optional<AllocatedAt> allocated_at;  // its allocation site, when the allocator sampled it
  std::string no_site;  // when it has none but the allocator samples: why ("not sampled at 1 per 512 KiB")
  std::vector<std::string> warnings;
};

struct HistogramRow {
  std::string type;    // by type: the type; by source: empty
  std::string naming;  // by type: as BlockRef::naming
  std::string source;  // where the type was declared (DWARF), empty when unknown
  std::vector<std::string> types;  // by source: the types declared there, most bytes first
  std::uint64_t count = 0, bytes = 0, leaked_count = 0, leaked_bytes = 0;
  std::vector<Address> examples;  // the first blocks of the row, lowest addresses first (--examples)
  // By site: the site (none for the row of blocks without one) and what its sampled blocks stand for.
  std::optional<AllocatedAt> site;
  double estimated_count = 0, estimated_bytes = 0;
};

struct HistogramReport {
  std::string by = "type";         // "type", "source" or "site"
  std::optional<SitesNote> sites;  // by site
  std::vector<HistogramRow> rows;  // by bytes, largest first
  std::uint64_t typed_blocks = 0, allocated_blocks = 0;
  std::vector<std::string> warnings;
};

}  // namespace heapscope
