// jemalloc 5.3 (libjemalloc.so.2, or a static copy) as an allocator plug-in: it applies when the module
// serving malloc is a jemalloc (it exports mallctl, or keeps jemalloc's private symbols); located by
// jemalloc_runtime, walked and checked (`verify`) by jemalloc_heap. It has no trimming rules
// (`fragmentation` reports page occupancy, slab utilisation, and its dirty and muzzy pages as free blocks).
#pragma once

#include "runtime/allocator.h"

namespace heapscope::jemalloc {

const AllocatorPlugin& allocator_plugin();

}  // namespace heapscope::jemalloc
