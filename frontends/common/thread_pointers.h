// Thread pointers (fs_base) without registers. LLDB 16 shows no fs_base for x86-64 Linux threads, live
// or in a core (its register sets stop at the segment selectors), yet the heap walk needs it for each
// thread's tcache and the roots for static TLS. The LLDB plugin and the Python module (which reads a
// process LLDB keeps stopped with the registers LLDB shows) complete their images from here.
//
// glibc keeps every thread's descriptor, struct pthread, on lists in ld.so's _rtld_global, whose layout it
// publishes for libthread_db; the engine's reader of those lists (read_libc_threads, the one the session
// uses) gives them. On x86-64 the descriptor is where fs_base points, and it starts with two pointers to
// itself (tcbhead_t.tcb and .self), which confirms every entry. musl has no such lists in a static program;
// its descriptors are found in memory instead (thread_pointers_from_memory: runtime/musl/musl_threads.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "image/collected_image.h"
#include "image/link_map.h"
#include "runtime/libc_runtime.h"
#include "symbols/symbol_index.h"

namespace heapscope {

// tid -> thread pointer of every live thread on glibc's lists. On failure, empty with the reason in *error.
std::map<std::uint32_t, Address> glibc_thread_pointers(const LibcThreads& threads, const MemoryReader& read,
                                                       std::string* error);

// Fills in the thread pointers of the threads of `image` whose fs_base is 0 (not shown by the debugger)
// from glibc's lists read with `symbols`, with a warning for each that stays unknown.
void complete_thread_pointers(CollectedImage& image, const SymbolSearchOptions& symbols);

// The warning of a thread whose thread pointer stays unknown (`index` counts from 0).
std::string unknown_thread_pointer(std::size_t index, std::uint32_t tid, const std::string& why);

}  // namespace heapscope
