// Boehm GC 8.2 (Debian's libgc1, or a program linked with libgc.a) as an allocator plug-in. The collector's
// heap lives beside whatever serves malloc (glibc's, usually: Debian's libgc does not redirect malloc), so
// the plug-in is located in addition to malloc's allocator and its blocks join the same model
// (AllocatorPlugin::beside_malloc). Located by boehm_runtime, walked and checked (`verify`) by boehm_heap;
// its registered finalizers are read by boehm_finalizers. No trimming rules (`fragmentation` reports page
// occupancy, block use per object size, and its free and unmapped runs of blocks).
#pragma once

#include "runtime/allocator.h"

namespace heapscope::boehm {

const AllocatorPlugin& allocator_plugin();

}  // namespace heapscope::boehm
