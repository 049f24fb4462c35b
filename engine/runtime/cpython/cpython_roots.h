// Memory of a CPython interpreter that holds words which are no references by the interpreter's rules,
// found by structure (no debug information needed): a root scan must not read them, or they keep garbage
// "reachable".
//   - The type cache (method cache): 4096 entries of {version, name, value} in the interpreter's data,
//     whose values are borrowed pointers (a cached function may be dead).
//   - The spent part of the main thread's data stack (3.11+: frames are pushed on mmap'ed chunks of
//     {previous, size, top, slots...}; the thread state keeps datastack_chunk, datastack_top and
//     datastack_limit side by side): the slots above the top hold the locals of returned calls.
#pragma once

#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope::cpython {

// The ranges, sorted, of the interpreter in `module` (which exports PyObject_Malloc).
std::vector<HeapSegment> non_reference_ranges(const Image& image, const SymbolIndex& symbols, const Module& module);

}  // namespace heapscope::cpython
