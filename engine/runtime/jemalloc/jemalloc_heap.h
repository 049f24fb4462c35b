// The jemalloc walk: every extent from the extent map's radix tree — slabs carved into regions by their
// bitmaps, large allocations, dirty and muzzy free pages — with the regions and large extents that thread
// caches hold marked as cached. Bounded everywhere; damage gives warnings and a partial model, and the same
// checks are `verify`'s findings.
#pragma once

#include "heap/heap_check.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/jemalloc/jemalloc_runtime.h"

namespace heapscope::jemalloc {

HeapModel walk_heap(const Image& image, const Runtime& runtime);

// `verify`: the walk's own checks as findings — arenas that do not name themselves, extents that do not
// cover the pages the extent map gives them or overlap, slabs of the wrong size or whose free count
// disagrees with their bitmap, thread cache stacks that are not whole, blocks cached twice or cached while
// free in their slab (freed twice), cached pointers that are no block of their class.
HeapVerification verify_heap(const Image& image, const Runtime& runtime);

}  // namespace heapscope::jemalloc
