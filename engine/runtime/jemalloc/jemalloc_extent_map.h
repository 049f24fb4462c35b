// The extent map (jemalloc's radix tree of pages, je_arena_emap_global), visited leaf by leaf: what the
// heap walk and the reading of profiling samples both go through.
#pragma once

#include <functional>

#include "image/image.h"
#include "runtime/jemalloc/jemalloc_runtime.h"

namespace heapscope::jemalloc {

// Calls visit(edata, page, entry) once for every extent the map holds, at the first page it is mapped at
// (slabs are mapped at every page, other extents at their first and last). A leaf that cannot be read is
// passed to unreadable(leaf) and skipped. False when the map's root itself cannot be read.
bool for_each_extent(const Image& image, const Runtime& rt,
                     const std::function<void(Address edata, Address page, const LeafEntry& entry)>& visit,
                     const std::function<void(Address leaf)>& unreadable);

}  // namespace heapscope::jemalloc
