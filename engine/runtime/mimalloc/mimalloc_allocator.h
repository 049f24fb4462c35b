// mimalloc 2.x (Debian's libmimalloc.so.2, preloaded or linked) as an allocator plug-in: it applies when
// the module serving malloc exports mi_version and mi_malloc; located by mimalloc_runtime (segments by their
// headers, which need no symbol), walked by mimalloc_heap, whose checks are also `verify`'s. It has no
// trimming rules (`fragmentation` reports page occupancy, its pages' use and its free spans).
#pragma once

#include "runtime/allocator.h"

namespace heapscope::mimalloc {

const AllocatorPlugin& allocator_plugin();

}  // namespace heapscope::mimalloc
