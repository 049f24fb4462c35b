// Memory of a CPython interpreter that holds words which are no references by the interpreter's rules,
// found by structure (no debug information needed): a root scan must not read them, or they keep garbage
// "reachable".
//   - The type cache (method cache): 4096 entries of {version, name, value} in the interpreter's data,
//     whose values are borrowed pointers (a cached function may be dead).
//   - The free lists of lists, dicts and dicts' keys (3.11+: in the interpreter's state, reached from a
//     thread's): { items[80] ... numfree }, whose slots past the count point to objects handed out again or
//     freed.
//   - The spent part of the main thread's data stack (3.11+: frames are pushed on mmap'ed chunks of
//     {previous, size, top, slots...}; the thread state keeps datastack_chunk, datastack_top and
//     datastack_limit side by side): the slots above the top hold the locals of returned calls.
#pragma once

#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/module_data.h"

namespace heapscope::cpython {

// A thread's data stack (3.11+), as its state's fields datastack_chunk, datastack_top and datastack_limit
// say: `fields` is where the first of them lies, the thread state being at a fixed offset before it.
struct DataStack {
  Address fields = 0;
  Address chunk = 0, top = 0, limit = 0;
};

// Each thread's data stack: its state, malloc'ed (PyMem_RawCalloc) or in the interpreter's data (`data`),
// is looked for in anonymous memory and there, one word at a time, until every chunk's is found.
std::vector<DataStack> find_data_stacks(const Image& image, const WritableRanges& data);

// The ranges, unsorted, of the interpreter whose data is `data`: its type cache's values, its free lists' and
// its data stacks' spent slots (`minor`: the release, 3.`minor`).
std::vector<HeapSegment> non_reference_ranges(const Image& image, const WritableRanges& data,
                                              const std::vector<DataStack>& stacks, int minor);

}  // namespace heapscope::cpython
