// The small part of a HeapModel — everything but its blocks: arenas, how structures were found, warnings,
// the allocator's own figures — as JSON text, for the index cache (session/index_cache.h). The blocks
// are saved apart, as raw 16-byte records.
#pragma once

#include <optional>
#include <string>

#include "heap/heap_model.h"

namespace heapscope {

std::string heap_meta_to_json(const HeapModel& heap);
// Fills every field of `heap` but blocks from `text`; false when it is not what heap_meta_to_json wrote.
bool heap_meta_from_json(const std::string& text, HeapModel& heap);

}  // namespace heapscope
