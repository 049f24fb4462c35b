// The walk of Boehm GC's heap into the heap model, and its checks for `verify`.
//
// The heap is a list of sections (GC_heap_sects) cut into 4 KiB blocks. Every block, or run of blocks, has
// a header kept outside the heap, found through a two-level index (the first level a hash of bottom
// indices on 64-bit, which GC_all_bottom_indices also lists in address order). A header says whether the
// run is free (FREE_BLK; WAS_UNMAPPED when its pages went back to the system) or holds objects of one
// size and kind: small objects (up to 2 KiB) packed into one block, a large object alone in a run. An
// object is free when it is on a free list — the kind's global lists, or a thread's local lists (free to
// that thread only: the model's `tcache` state) — and allocated otherwise, whether or not anything still
// reaches it (the collector frees unreachable objects at its next collection, or its next sweep of the
// block). Objects are headerless (BlockLayout::bare).
#pragma once

#include <optional>

#include "heap/heap_check.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/boehm/boehm_runtime.h"

namespace heapscope::boehm {

HeapModel walk_heap(const Image& image, const Runtime& rt);

// The walk again, every problem it meets recorded as a finding (sections, headers, free lists).
HeapVerification verify_heap(const Image& image, const Runtime& rt);

}  // namespace heapscope::boehm
