// Thread pointers (fs_base) without registers, for LLDB 16, which shows none: glibc's thread lists read
// over LLDB's memory and symbols (frontends/common/thread_pointers.h says how).
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
