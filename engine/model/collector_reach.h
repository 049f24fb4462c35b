// What a garbage collector's next collection keeps of its heap, by its own rules (HeapModel::collector):
// the collector's objects reached from its roots (RootRange::collector_root) and from the objects it scans,
// never from the malloc heap or from memory nobody registered. Its uncollectable objects are roots of its
// heap whatever reaches them. A pointer into an object's interior counts from a thread's stack and
// registers always, and from anywhere else when the collector recognises interior pointers, or at one of
// the displacements registered with it.
#pragma once

#include <cstdint>
#include <vector>

#include "heap/heap_model.h"
#include "model/reference_graph.h"

namespace heapscope {

// Per block: 1 for a block of the collector's heap its next collection keeps (an uncollectable one too), 0
// for everything else. Empty when the heap has no collector.
std::vector<std::uint8_t> collector_keeps(const ReferenceGraph& graph, const HeapModel& heap);

// Whether block `b` is an allocated object of the collector's heap.
inline bool in_collectors_heap(const HeapModel& heap, const Block& b) {
  return heap.collector && b.arena == heap.collector->arena && is_allocated(b.state);
}

// Whether block `b` is one the collector frees when nothing it counts reaches it: an allocated block of its
// heap, not uncollectable.
inline bool collectable(const HeapModel& heap, const Block& b) { return in_collectors_heap(heap, b) && !b.uncollectable; }

}  // namespace heapscope
