// The jemalloc walk: every extent from the extent map's radix tree — slabs carved into regions by their
// bitmaps, large allocations, dirty and muzzy free pages — with the regions and large extents that thread
// caches hold marked as cached. Bounded everywhere; damage gives warnings and a partial model.
#pragma once

#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/jemalloc/jemalloc_runtime.h"

namespace heapscope::jemalloc {

HeapModel walk_heap(const Image& image, const Runtime& runtime);

}  // namespace heapscope::jemalloc
