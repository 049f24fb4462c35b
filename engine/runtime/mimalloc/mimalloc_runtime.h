// Locating mimalloc in a process image. mimalloc exports only functions (Debian's library is stripped of
// everything else), and needs no global to be walked: its memory is segments aligned to 32 MiB whose
// headers describe their pages, so the segments are found by reading the header at every 32 MiB boundary
// of the image's memory and keeping those that check out — each names itself through its cookie (its
// address xor the main heap's cookie, the same for every segment of the process). Heaps are found from
// their pages (each page names its heap), threads' data from their heaps. Only the statistics need a
// global (_mi_stats_main): its symbol when the library has one, else a scan of the library's writable
// data for its signature. How each was found is recorded as a Discovery.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/mimalloc/mimalloc_layout.h"
#include "symbols/symbol_index.h"

namespace heapscope::mimalloc {

struct Segment {
  Address address = 0;
  std::uint64_t slices = 0;       // segment_slices: its bytes / 64 KiB
  std::uint64_t info_slices = 0;  // slices the header takes
  std::uint64_t slice_entries = 0;
  std::uint32_t kind = 0;         // SegmentLayout::kNormal or kHuge
  std::uint64_t used = 0;         // pages in use
  std::uint64_t abandoned = 0;    // pages whose thread ended
  Address thread_id = 0;          // the owner's thread id (its fs base); 0: abandoned, or freed to the cache
  std::uint64_t committed_bytes = 0;  // by its commit mask
  std::uint64_t bytes() const { return slices * kSliceBytes; }
  Address end() const { return address + bytes(); }
  // A segment mimalloc freed to its segment cache keeps its header, but no page and no owner.
  bool cached() const { return used == 0 && thread_id == 0; }
  bool abandoned_whole() const { return used != 0 && thread_id == 0; }
};

struct Runtime {
  const Layout* layout = nullptr;
  const Module* module = nullptr;
  std::string version;            // "2.0.9"; empty when unknown
  std::uint64_t cookie = 0;       // the main heap's cookie: segment address xor segment cookie
  std::vector<Segment> segments;  // in address order, those freed to the cache included
  Address main_heap = 0;          // _mi_heap_main when its symbol says (else the walk finds it from pages)
  Address stats_main = 0;         // _mi_stats_main, 0 when not found
  std::vector<Discovery> discovery;
  std::vector<std::string> warnings;
  // Segment headers were found that are not this process's (a damaged cookie): what they hold is missing.
  bool segments_missing = false;
};

// Whether `module` is mimalloc by its symbols: it exports mi_version and mi_malloc.
bool is_mimalloc(const Module& module, const SymbolIndex& symbols);

// mi_version()'s value (209 for 2.0.9), read from its code (`mov $N, %eax; ret`); nothing when unreadable.
std::optional<unsigned> read_version(const Image& image, const SymbolIndex& symbols, const Module& module);

// Null with *error when `module` (the one serving malloc) is mimalloc but its heap cannot be read.
std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, const Module& module,
                                      std::string* error);

// The header at `at` (a 32 MiB boundary) when it looks like a segment's; its cookie is not checked here.
std::optional<Segment> read_segment_header(const Image& image, const Layout& layout, Address at, std::uint64_t* cookie);

// Whether `at` looks like _mi_stats_main: every count consistent (current = allocated - freed, peak at
// least current), memory reserved and committed (a thread's own statistics reserve and commit nothing: the
// OS layer counts in _mi_stats_main alone).
bool is_main_stats(const Image& image, const Layout& layout, Address at);

}  // namespace heapscope::mimalloc
