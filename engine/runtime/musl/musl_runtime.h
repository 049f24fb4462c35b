// Locating musl's mallocng in a process image. Its one global, the malloc context (`__malloc_context`,
// hidden), is found by symbol in a static executable that keeps its symbol table. Without it (a stripped
// program, or Debian's stripped ld-musl/libc.so), the context's secret is known all the same: musl draws it
// from the 16 random bytes the kernel hands every process (AT_RANDOM, bytes 8-15), and writes it as the
// first word of every meta area. So the meta areas are the page-aligned pages of writable memory whose first
// word is the secret, and the context is the word of the library's writable data that holds the secret and
// heads their list. How each was found is recorded as a Discovery.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/musl/musl_layout.h"
#include "symbols/symbol_index.h"

namespace heapscope::musl {

struct Runtime {
  const Module* module = nullptr;  // the module holding musl's malloc; null when no symbol says (stripped)
  std::string version;             // "1.2.3" when the library says; empty for a static program
  std::uint64_t secret = 0;
  Address context = 0;             // __malloc_context, 0 when not found
  std::vector<Address> areas;      // meta areas, in list order (or address order when found by scan)
  std::vector<Discovery> discovery;
  std::vector<std::string> warnings;
  bool areas_missing = false;      // the area list broke at a non-area: what a lost area describes is missing
};

// The secret musl's malloc draws from AT_RANDOM; nothing when the image has no auxiliary vector or its
// random bytes are not in memory.
std::optional<std::uint64_t> secret_from_auxv(const Image& image);

// Whether `module` holds musl's malloc by its symbols (`__malloc_context`, `__libc_malloc_impl` with
// `__malloc_alloc_meta`, or the bump allocator `__simple_malloc`), or is musl's dynamic linker and C library
// by name (ld-musl-*.so.1, libc.musl-*).
bool is_musl(const Module& module, const SymbolIndex& symbols);

// Whether the process's C library is musl: a module named as musl's, or a static executable with mallocng's symbols.
bool is_musl_process(const Image& image, const SymbolIndex& symbols);

// A static musl program that never calls free() gets musl's bump allocator (`__simple_malloc`), which keeps
// no record of its blocks: true when `module` is one.
bool uses_simple_malloc(const Module& module, const SymbolIndex& symbols);

// Null with *error when musl's malloc cannot be read. `module` may be null (a stripped static program): the
// meta areas are then looked for by the secret alone, and *error says so when there are none.
std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, const Module* module,
                                      std::string* error);

}  // namespace heapscope::musl
