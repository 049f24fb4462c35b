// The runtimes heapscope knows, in one place: the allocator plug-ins, in the order they are asked, and the
// C library readers. Adding an allocator is one line in builtin_runtimes.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/libc_runtime.h"

namespace heapscope {

const std::vector<const AllocatorPlugin*>& builtin_allocator_plugins();

// The process's thread descriptors, exited ones included (glibc's used and cache lists).
LibcThreads read_libc_threads(const Image& image, const SymbolIndex& symbols);

// The same from memory and symbols alone, stack ranges left empty: for a debugger frontend that needs the
// thread pointers (descriptors) to complete its Image.
LibcThreads read_libc_threads(const MemoryReader& read, const LibcSymbolLookup& lookup);

// tid -> thread pointer of the image's threads found in memory alone, for an image whose debugger shows no
// fs_base and whose C library's lists gave none: musl's descriptors (runtime/musl/musl_threads.h).
std::map<std::uint32_t, Address> thread_pointers_from_memory(const Image& image);

// Every exit handler, thread_local destructor and pthread key destructor registered, and what each holds.
LibcFinalizers read_libc_finalizers(const Image& image, const HeapModel& heap, const SymbolIndex& symbols,
                                    const LibcThreads& threads);

}  // namespace heapscope
