// Thread pointers (fs_base) without registers. LLDB 16 shows no fs_base for x86-64 Linux threads, live
// or in a core (its register sets stop at the segment selectors), yet the heap walk needs it for each
// thread's tcache and the roots for static TLS.
//
// glibc keeps every thread's descriptor, struct pthread, on lists in ld.so's _rtld_global, whose layout it
// publishes for libthread_db; the engine's reader of those lists (read_libc_threads, the one the session
// uses) runs here over LLDB's memory and symbols. On x86-64 the descriptor is where fs_base points, and it
// starts with two pointers to itself (tcbhead_t.tcb and .self), which confirms every entry.
#pragma once

#include <lldb/API/LLDB.h>

#include <cstdint>
#include <map>
#include <string>

#include "image/link_map.h"

namespace heapscope::lldb_plugin {

// tid -> thread pointer of every thread on glibc's lists. On failure, empty with the reason in *error.
// Call on the LLDB thread (it looks symbols up through target).
std::map<std::uint32_t, Address> glibc_thread_pointers(lldb::SBTarget target, const MemoryReader& read,
                                                       std::string* error);

}  // namespace heapscope::lldb_plugin
