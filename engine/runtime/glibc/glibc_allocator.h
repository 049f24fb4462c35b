// glibc's ptmalloc2 as an allocator plug-in: located through glibc_runtime, walked by glibc_heap, checked
// by glibc_verify. The one place outside runtime/glibc/ that names it is the plug-in list (runtime/builtin/).
#pragma once

#include "runtime/allocator.h"

namespace heapscope::glibc {

const AllocatorPlugin& allocator_plugin();

}  // namespace heapscope::glibc
