// The mallocng walk: every live meta of every meta area names a group; each group's slots are blocks by its
// meta's masks — `free` when available or freed, else in use, the object found through the slot's in-band
// header (it may lie some units into the slot) and its requested size read from the reserved bytes. A slot
// that holds a smaller class's group (mallocng nests small groups in larger slots) is no block: the nested
// group's slots are. Groups with a mapping of their own make the context's one arena; individually mmapped
// allocations (size class 63) are `mmapped` blocks. Bounded everywhere; damage (a group that does not
// point back at its meta, a slot header that does not name its slot) gives warnings and a partial model,
// and the same checks are `verify`'s findings.
#pragma once

#include "heap/heap_check.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/musl/musl_runtime.h"

namespace heapscope::musl {

HeapModel walk_heap(const Image& image, const Runtime& runtime);

// `verify`: the walk's checks as findings — metas whose class, masks or mapping do not fit, groups that do
// not point back at their meta, slot headers that do not name their slot or whose reserved bytes disagree
// (a write past the requested size), nested groups no slot holds, the context's active lists.
HeapVerification verify_heap(const Image& image, const Runtime& runtime);

}  // namespace heapscope::musl
