// Names from a language runtime's own type objects: every CPython object points to its type, whose name
// the interpreter keeps in memory (runtime/object_headers.h finds the objects and reads the names). These
// are the names the program's own programmers use ("str", "dict", "Order"), certain, and given before any
// other namer runs, so that DWARF and the namers of leaks leave them as they are.
#pragma once

#include <span>
#include <vector>

#include "runtime/object_headers.h"
#include "types/block_types.h"

namespace heapscope {

// Names the blocks holding a runtime's objects (Naming::runtime), among `members` (every block when null)
// and within `within` when given; a block named already (by its vtable) keeps its name.
void name_runtime_objects(BlockTypes& types, const ObjectHeaders& objects, const std::vector<bool>* within = nullptr,
                          const std::vector<BlockId>* members = nullptr);

}  // namespace heapscope
