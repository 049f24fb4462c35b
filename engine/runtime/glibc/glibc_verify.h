// `heap verify`: a consistency check of glibc malloc's own structures, for heaps the program may have
// damaged (overflows, double frees, writes after free). It starts from what the walker found (the
// HeapModel: arenas, heap segments, blocks, where damage stopped a walk) and checks what the walker
// trusts: chunk headers against their neighbours and the free lists, every bin, fastbin and tcache list
// link by link, top chunks and heap_info headers. It only reads the image.
#pragma once

#include "heap/heap_check.h"
#include "runtime/glibc/glibc_runtime.h"
#include "heap/heap_model.h"
#include "image/image.h"

namespace heapscope {

namespace glibc {

// Checks the glibc heap `model` was walked from, with malloc's globals as the walk located them (unit
// tests build the Runtime by hand). Bounded in time and memory on any input: every list walk stops at a
// repeated chunk or after as many steps as the model has blocks.
HeapVerification verify_heap(const Image& image, const Runtime& runtime, const HeapModel& model);

}  // namespace glibc
}  // namespace heapscope
