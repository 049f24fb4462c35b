// musl's malloc (mallocng, musl 1.2.x) as an allocator plug-in: a static program linked with musl
// (musl-gcc -static; Alpine's binaries), with its symbols or stripped, and a dynamically linked one whose C
// library is musl's (ld-musl-x86_64.so.1). Located by musl_runtime (the malloc context by symbol or by its
// secret, the meta areas by the secret), walked by musl_heap, whose checks are also `verify`'s. It has no
// trimming rules (`fragmentation` reports page occupancy, its groups' use and its free slots).
#pragma once

#include "runtime/allocator.h"

namespace heapscope::musl {

const AllocatorPlugin& allocator_plugin();

}  // namespace heapscope::musl
