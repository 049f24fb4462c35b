// Report objects are plain data: an analysis fills them, a formatter renders them (text, JSON, ...).
#pragma once

#include "reports/naming_share.h"
#include "reports/sites_note.h"

#include <optional>
#include <string>
#include <vector>

#include "heap/heap_model.h"

namespace heapscope {

struct ThreadRow {
  std::uint32_t tid = 0;
  std::string name;
};

struct ModuleRow {
  std::string path;
  Address load_bias = 0;
  std::string build_id;
  std::string symbols;  // "debug file /usr/lib/debug/...", "symtab", "dynsym only", "no file"
  std::string file;         // the file read for the module; empty when none
  std::string file_origin;  // "path" (as recorded), "--exe", "sysroot", "debuginfod", "none"
  std::string debug_file;   // the separate debug file in use; empty when none
  // Where the full symbol table and the DWARF came from: "file", "build-id", "debuglink", "debuginfod",
  // "none" ("dynsym" for the symbol table when only the dynamic symbols are there).
  std::string symtab_source;
  std::string dwarf_source;
  std::vector<std::string> missing;  // "module file", "symbol table", "DWARF"
  std::string install_hint;          // "apt install libc6-dbg" when a package with the DWARF is known
};

// How much of the heap carries a type (vtables, std::function managers, coroutine frames, DWARF): over
// allocated blocks, usable bytes.
struct TypedShare {
  std::uint64_t blocks = 0, bytes = 0;                // typed
  std::uint64_t in_use_blocks = 0, in_use_bytes = 0;  // all allocated
  std::vector<NamingShare> by_naming;  // the allocated blocks per evidence, most reliable first, "none" last
  double bytes_percent() const { return in_use_bytes ? 100.0 * static_cast<double>(bytes) / static_cast<double>(in_use_bytes) : 0; }
};

// Writable anonymous memory that no allocator walk accounts for: not a heap segment, not an mmapped chunk,
// not a thread's stack. Another allocator's arenas (CPython's pymalloc, a pool), a cache mmap'ed by hand.
struct AnonymousMapping {
  Address start = 0, end = 0;
  std::uint64_t outside_bytes = 0;  // of it, the bytes no walk accounts for
};
struct OutsideMalloc {
  std::uint64_t bytes = 0;
  std::uint64_t mappings = 0;
  std::vector<AnonymousMapping> largest;  // most outside bytes first, a few
};

struct SummaryReport {
  std::string target;  // Image::description()
  int pid = 0;
  std::string executable;
  std::string command_line;  // the arguments in the image's memory (command_line_in_memory), or empty
  std::vector<ThreadRow> threads;
  std::vector<ModuleRow> modules;
  // Text lists each module's missing debug info and its package (-v); else one line for them all.
  bool every_module_missing = false;

  std::string heap_error;  // set when no heap could be walked; the rest of the heap fields are empty
  std::string allocator;
  std::string version;
  bool heap_complete = true;
  std::vector<Discovery> discovery;
  std::vector<ArenaInfo> arenas;
  StateTotal mmapped;
  StateTotals totals{};
  std::optional<MallInfo> mallinfo;  // glibc's only
  StateLabels state_labels = glibc_state_labels();
  AllocatorTerms terms;  // the arena table's words (HeapModel::terms)
  std::vector<AllocatorFigure> figures;
  std::optional<TypedShare> typed;  // absent when the heap was not walked or the names were not counted
  std::optional<OutsideMalloc> outside_malloc;  // likewise
  // Address space the allocator keeps without memory (HeapModel::reserved): ranges and bytes.
  StateTotal reserved;
  // Allocation sites from the allocator's own sampling: absent when the allocator has nothing to say of them
  // (glibc's malloc keeps none).
  std::optional<SitesNote> sites;

  std::vector<std::string> warnings;
};

}  // namespace heapscope
