// glibc's own list of thread descriptors (struct pthread), which outlives the threads: a joinable thread
// that exited stays on the "used" list, stack mapped, until someone joins it; an exited detached or
// joined thread's stack waits on the cache list for reuse. Both kinds of stack are dead memory that a
// conservative scan must not treat as live, and the former is a leak of its own (a pthread_t kept but
// never joined). Layouts come from the `_thread_db_*` descriptors glibc exports for libthread_db, so
// no debug symbols are needed.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "image/image.h"
#include "runtime/libc_runtime.h"
#include "symbols/symbol_index.h"

namespace heapscope {

LibcThreads find_glibc_threads(const Image& image, const SymbolIndex& symbols);
// The same from memory and symbol addresses alone, stack ranges left empty (what a debugger frontend can
// give before its Image is complete).
LibcThreads find_glibc_threads(const MemoryReader& read, const LibcSymbolLookup& lookup);

// A `_thread_db_*` layout descriptor libc exports for libthread_db: {size in bits, count, offset} as three
// uint32 (a structure member, an array or a variable).
struct ThreadDbDescriptor {
  std::uint32_t size_bits = 0, count = 0, offset = 0;
};
std::optional<ThreadDbDescriptor> thread_db_descriptor(const Image& image, const SymbolIndex& symbols,
                                                       const Module& libc, std::string_view name);
// A `_thread_db_sizeof_*` value: the size of a structure in bytes.
std::optional<std::uint32_t> thread_db_sizeof(const Image& image, const SymbolIndex& symbols, const Module& libc,
                                              std::string_view name);

}  // namespace heapscope
