// Locating jemalloc's globals in a process image: the arena array (je_arenas), the extent map's radix tree
// (je_arena_emap_global), the small classes' slab geometry (je_bin_infos) and the size class table
// (je_sz_index2size_tab). A static copy keeps their symbols; Debian's shared library is stripped of them,
// so they are placed where the library's build-id says (a known build), and failing that found by a scan
// of the library's writable data for their signatures. Each is accepted only when its contents check
// out (the size classes' known start and order, every bin's geometry against its size, arena 0 naming
// itself, a radix tree whose leaves lead to extents that cover their pages). How each was found is recorded
// as a Discovery.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/jemalloc/jemalloc_layout.h"
#include "runtime/module_data.h"
#include "symbols/symbol_index.h"

namespace heapscope::jemalloc {

struct BinInfo {  // one small size class: its slabs hold `regions` regions of `region_size` bytes
  std::uint64_t region_size = 0;
  std::uint64_t slab_size = 0;
  std::uint32_t regions = 0;
  std::uint32_t shards = 1;  // bins of this class per arena
};

struct Runtime {
  const Layout* layout = nullptr;
  const Module* module = nullptr;
  std::string version;       // "5.3.0-0-g54eaed1d…", empty when unknown
  bool initialized = false;  // false before the first allocation: no arena exists yet
  Address arenas = 0;        // &je_arenas[0]
  Address emap = 0;          // &je_arena_emap_global (its radix tree)
  std::vector<std::uint64_t> sizes;  // size class index → usable size (kSizeClasses entries)
  std::vector<BinInfo> bins;         // small size class index → slab geometry (kSmallClasses entries)
  // Heap profiling's switches (je_opt_prof, je_lg_prof_sample) where symbols or a known build place them;
  // 0 when unknown (then samples are still read, each checked, but the rate is unknown).
  Address opt_prof = 0;
  Address lg_prof_sample = 0;
  std::vector<Discovery> discovery;
  std::vector<std::string> warnings;
};

// Whether `module` is a jemalloc by its symbols (an exported mallctl, or the private je_ globals).
bool is_jemalloc(const Module& module, const SymbolIndex& symbols);

// Where a global is expected before any check, and what placed it there ("symbol", "known-build").
struct Placed {
  std::optional<Address> at;
  std::string method;
};
struct Placements {
  Placed size_table, bin_infos, arenas, emap;
};

// Finds the globals at their placements, each checked, else by a scan of `writable` (the library's data);
// fills rt's addresses, tables and discovery (rt.layout must be set). An image where the size table and
// arena 0 are still empty at their placements is jemalloc before its first allocation: rt.initialized is
// false then. False with *error when a global is found nowhere.
bool find_globals(const Image& image, const Module& module, const WritableRanges& writable,
                  const Placements& placements, Runtime& rt, std::string* error);

// Null with *error when jemalloc's structures cannot be found in `module` (the one serving malloc).
std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, const Module& module,
                                      std::string* error);

// The release string ("5.3.0-0-g…") the library carries, or nothing.
std::optional<std::string> detect_release(const ModuleSymbols& symbols);

// The checks that accept a candidate address for each structure.
std::optional<std::vector<std::uint64_t>> read_size_table(const Image& image, Address table);
std::optional<std::vector<BinInfo>> read_bin_infos(const Image& image, const Layout& layout, Address infos,
                                                   const std::vector<std::uint64_t>& sizes);
// arena_t `arena` says it is arena `index` and has a metadata allocator of its own index.
bool is_arena(const Image& image, const Layout& layout, Address arena, std::uint32_t index);
// The radix tree at `emap` draws from `base` and its first leaf's first entry leads to an extent covering
// that entry's page.
bool is_emap(const Image& image, const Layout& layout, Address emap, Address base);

}  // namespace heapscope::jemalloc
