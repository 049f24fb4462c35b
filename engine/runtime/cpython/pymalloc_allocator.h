// CPython's pymalloc (pymalloc_heap.h) as an allocator plug-in: its pools live beside whatever serves malloc
// (AllocatorPlugin::beside_malloc), located wherever an interpreter runs with its default allocator, their
// slots joining malloc's blocks in one model. No trimming rules heapscope knows (an arena goes back to the
// system when its last pool empties).
#pragma once

#include "runtime/allocator.h"

namespace heapscope::pymalloc {

const AllocatorPlugin& allocator_plugin();

}  // namespace heapscope::pymalloc
