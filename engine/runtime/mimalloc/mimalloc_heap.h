// The mimalloc walk: every segment's slices — the header's own, free spans, and pages carved into blocks of
// their size — with each block's state from its page's lists: `free` (the page's free list, and the room
// it has not yet handed out), deferred (`tcache`: freed but not yet back on the free list — the page's
// local-free list, the thread-free list other threads pushed to, and the heap's thread-delayed list).
// Segments of threads that ended are abandoned (no owner) and walked like the others; segments freed to
// mimalloc's segment cache hold no blocks. Bounded everywhere; damage gives warnings and a partial model,
// and the same checks are `verify`'s findings.
#pragma once

#include "heap/heap_check.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/mimalloc/mimalloc_runtime.h"

namespace heapscope::mimalloc {

HeapModel walk_heap(const Image& image, const Runtime& runtime);

// `verify`: the walk's checks as findings — slices that do not tile their segment, pages whose geometry
// does not fit, free, local-free, thread-free and delayed lists that leave their page, loop or hold a block
// twice, pages whose `used` count disagrees with their lists, heaps that do not name their thread.
HeapVerification verify_heap(const Image& image, const Runtime& runtime);

}  // namespace heapscope::mimalloc
