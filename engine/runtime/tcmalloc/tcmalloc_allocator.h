// gperftools' tcmalloc (libtcmalloc_minimal.so.4, libtcmalloc.so.4) as an allocator plug-in: it applies
// when the module serving malloc exports tcmalloc::Static::pageheap_lock_; located by tcmalloc_runtime,
// walked by tcmalloc_heap. It has no checks of its own structures (`verify`) and no trimming rules
// (`fragmentation` reports page occupancy only).
#pragma once

#include "runtime/allocator.h"

namespace heapscope::tcmalloc {

const AllocatorPlugin& allocator_plugin();

}  // namespace heapscope::tcmalloc
