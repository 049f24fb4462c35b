// Runtimes that put a fixed header in front of every object they allocate with malloc (CPython's
// PyGC_Head before each GC-tracked object). Their programs point to the object, a fixed number of bytes
// into the block, and link the headers into the runtime's own lists. Both would mislead a conservative
// scan: the block would look reachable only through an interior pointer ("possibly leaked"), and the
// lists would tie every object to every other, so that nothing dominates anything. With the headers
// recognised, a pointer just past a header counts as a pointer to the block, and the header's links are
// the runtime's bookkeeping, not references.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"

namespace heapscope {

struct ObjectHeaders {
  std::string layout;          // what was recognised: "CPython PyGC_Head (16 bytes before each GC-tracked object)"
  std::uint32_t header_bytes = 0;  // a pointer this far into a marked block points to its object
  std::uint32_t link_bytes = 0;    // the header's first bytes are list links, not references
  std::vector<std::uint64_t> marked;  // a bit per block: the block starts with such a header
  std::uint64_t count = 0;            // marked blocks

  bool has(std::uint32_t block) const { return block / 64 < marked.size() && (marked[block / 64] >> (block % 64) & 1); }
};

// The object headers of the runtime the image runs, when one of those heapscope knows is there and its
// objects are found in the heap; nothing otherwise. Cheap when no such runtime is loaded.
std::optional<ObjectHeaders> find_object_headers(const Image& image, const HeapModel& heap);

}  // namespace heapscope
