// Thread pointers (fs_base) without registers. LLDB 16 shows no fs_base for x86-64 Linux threads, live
// or in a core (its register sets stop at the segment selectors), yet the heap walk needs it for each
// thread's tcache and the roots for static TLS.
//
// glibc keeps every thread's descriptor, struct pthread, on two lists in ld.so's _rtld_global
// (_dl_stack_user, which holds the main thread, and _dl_stack_used), and it publishes the layout of
// both for libthread_db in exported _thread_db_* symbols (three words each: field size in bits, count,
// offset). On x86-64 the descriptor is where fs_base points, and it starts with two pointers to itself
// (tcbhead_t.tcb and .self), which confirms every entry. Following the lists gives each tid's thread
// pointer the way a debugger's libthread_db would, needing only memory and the dynamic symbols.
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
