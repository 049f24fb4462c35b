// The glibc ptmalloc2 walker: every arena and heap, tcache, fastbins, bins and mmapped chunks, exactly.
#pragma once

#include <optional>
#include <string>

#include "heap/glibc/glibc_runtime.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope::glibc {

// Null with *error when no glibc heap can be found at all; otherwise a model whose warnings say what
// could not be walked (damaged chunks, unreadable memory), with `complete` false in that case.
std::optional<HeapModel> walk_heap(const Image& image, const SymbolIndex& symbols, std::string* error);
// The walk itself, given where malloc's state is (locate_runtime, or a hand-made Runtime in tests).
HeapModel walk_heap(const Image& image, const Runtime& runtime);

}  // namespace heapscope::glibc
