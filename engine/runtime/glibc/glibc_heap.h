// The glibc ptmalloc2 walker: every arena and heap, tcache, fastbins, bins and mmapped chunks, exactly.
#pragma once

#include "runtime/glibc/glibc_runtime.h"
#include "heap/heap_model.h"
#include "image/image.h"

namespace heapscope::glibc {

// The walk itself, given where malloc's state is (locate_runtime, or a hand-made Runtime in tests).
HeapModel walk_heap(const Image& image, const Runtime& runtime);

}  // namespace heapscope::glibc
