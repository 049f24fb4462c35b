// Locating gperftools tcmalloc's globals in a process image. The library exports few data symbols
// (Static::pageheap_lock_, Static::inited_, ThreadCache::thread_heaps_); the size map, the central free
// lists and the page heap are hidden, so they are placed relative to pageheap_lock_ as a known build lays
// them out, and each is accepted only when its contents look right (the size classes' increasing sizes,
// every central list naming its own class, the page heap's free lists and its page map allocator). When a
// placement fails that check, the library's writable data is scanned for the same signatures. How each was
// found is recorded as a Discovery.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/module_data.h"
#include "runtime/tcmalloc/tcmalloc_layout.h"
#include "symbols/symbol_index.h"

namespace heapscope::tcmalloc {

struct SizeClass {
  std::uint32_t size = 0;          // object bytes
  std::uint64_t pages = 0;         // pages per span
  std::uint32_t move_count = 0;    // objects per transfer-cache chain
};

struct Runtime {
  const Layout* layout = nullptr;
  const Module* module = nullptr;
  std::string version;  // "2.10"; empty when unknown
  bool full_library = false;  // gperftools' full libtcmalloc (with the heap profiler), not libtcmalloc_minimal
  bool inited = false;  // Static::inited_: false before the first allocation
  Address sizemap = 0, central_cache = 0, pageheap = 0;
  Address thread_heaps = 0;  // &ThreadCache::thread_heaps_ (0 when the symbol is missing)
  std::vector<SizeClass> classes;  // index = size class; class 0 is unused
  std::vector<Discovery> discovery;
  std::vector<std::string> warnings;
};

// The mangled names of the exported statics heapscope relies on.
inline constexpr const char* kPageheapLockSymbol = "_ZN8tcmalloc6Static14pageheap_lock_E";
inline constexpr const char* kInitedSymbol = "_ZN8tcmalloc6Static7inited_E";
inline constexpr const char* kThreadHeapsSymbol = "_ZN8tcmalloc11ThreadCache13thread_heaps_E";

// Places Static::sizemap_, central_cache_ and pageheap_ at `lock` (pageheap_lock_) plus the offsets of
// `placement` (recorded with the method `placed`), each accepted only when its check holds; one that fails
// it is searched for in `writable` by its signature (method "scan"). Fills rt's addresses, classes and
// discovery (rt.layout must be set); false with *error when one is found nowhere.
bool place_statics(const Image& image, const Module& module, const WritableRanges& writable, Address lock,
                   const KnownBuild& placement, const std::string& placed, Runtime& rt, std::string* error);

// Null with *error when `module` (the one serving malloc) is not tcmalloc or its structures cannot be found.
std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, const Module& module,
                                      std::string* error);

// The release from the "gperftools X.Y" string in the library file, or nothing.
std::optional<std::string> detect_release(const ModuleSymbols& symbols);

// The size classes of the SizeMap at `sizemap`, or nothing when it does not look like one.
std::optional<std::vector<SizeClass>> read_size_classes(const Image& image, const Layout& layout, Address sizemap);
// Whether the CentralFreeList at `list` looks like the one of `size_class`.
bool is_central_list(const Image& image, const Layout& layout, Address list, std::size_t size_class);
// Whether `central` looks like Static::central_cache_ for these classes (all but a tenth of its lists do).
bool is_central_cache(const Image& image, const Layout& layout, Address central, std::size_t classes);
// Whether `pageheap` looks like Static::pageheap_ of the library `module`.
bool is_pageheap(const Image& image, const Layout& layout, Address pageheap, const Module& module);

}  // namespace heapscope::tcmalloc
