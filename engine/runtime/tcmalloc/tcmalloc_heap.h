// Walking gperftools tcmalloc's heap into a HeapModel. Spans come from the page heap's page map (a radix
// tree of page → Span); a span in use with a size class is carved into objects of that class, one with none
// is one large block, a span on the page heap's free lists is one free block. Objects on the span's own free
// list (the central free list) are free; those in thread caches and transfer caches are `tcache` (free to
// the program, held by the allocator's caches). Every loop is bounded: damage gives a warning and a partial
// model.
#pragma once

#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/tcmalloc/tcmalloc_runtime.h"

namespace heapscope::tcmalloc {

HeapModel walk_heap(const Image& image, const Runtime& runtime);

}  // namespace heapscope::tcmalloc
