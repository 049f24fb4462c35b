// Locating glibc malloc's globals in a process image: the libc module and its release, main_arena, mp_,
// and the thread-local tcache pointer. Each is found by debug symbol when libc's debug file is at hand,
// and by a symbol-free method otherwise (relocations, signature scans, the TLS GOT), so heapscope works on
// machines without libc6-dbg. How each was found is recorded as a Discovery.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/glibc/glibc_layout.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope::glibc {

struct MallocParams {  // what heapscope reads from mp_
  Address address = 0;
  Address sbrk_base = 0;
  int n_mmaps = 0;
  std::uint64_t mmapped_mem = 0;
  std::uint64_t hp_pagesize = 0;
  std::uint64_t trim_threshold = 0;  // free() trims top only once it is at least this big
  std::uint64_t top_pad = 0;         // bytes of top that trimming keeps
};

struct Runtime {
  Layout layout;
  const Module* libc = nullptr;
  Address main_arena = 0;
  std::optional<MallocParams> params;
  std::optional<std::int64_t> tcache_tp_offset;  // tcache pointer of a thread = *(fs_base + this)
  std::vector<Discovery> discovery;
  std::vector<std::string> warnings;

  // Heaps of non-main arenas are aligned to this (HEAP_MAX_SIZE, or 4 huge pages with hugetlb=2).
  std::uint64_t heap_alignment() const {
    return params && params->hp_pagesize ? 4 * params->hp_pagesize : kDefaultHeapMaxSize;
  }
};

// libc's module, or the main executable of a static program (which carries its own malloc); null when
// the image has neither.
const Module* libc_of(const Image& image);
// Null (with *error saying why) when the image shows no glibc malloc at all.
std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, std::string* error);

// Release of the libc in `module` ("2.36" → 36), from the version banner in its file or its file name.
std::optional<int> detect_glibc_minor(const Module& module, const ModuleSymbols* symbols);

}  // namespace heapscope::glibc

namespace heapscope::glibc {

// The arenas on the ring that starts at `first` (main_arena.next links them), in ring order, at most
// `limit` of them. Stops with a warning at a pointer that cannot be read or a ring that does not close.
// *closed (when given) says whether the ring came back to `first`: if not, arenas may be missing.
std::vector<Address> arena_ring(const Image& image, const Layout& layout, Address first,
                                std::vector<std::string>* warnings, std::size_t limit = 4096,
                                bool* closed = nullptr);

}  // namespace heapscope::glibc
