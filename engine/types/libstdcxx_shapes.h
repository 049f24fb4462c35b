// libstdc++'s heap shapes, recognised without debug info (Naming::pattern): what a std::string, vector,
// list, map/set, unordered_map/set or deque allocates has a layout its owner and its neighbours confirm.
// Each shape is checked from both ends, so that a user's own structure that happens to look like one
// piece does not read as the container:
//   std::string body     the referrer holds pointer, length, capacity: length ≤ capacity, the block sized
//                        for capacity + 1 bytes, a NUL at [length]
//   std::vector body     the referrer holds begin ≤ end ≤ end of storage, begin the block's start and end of
//                        storage its end (as the allocator sized it)
//   std::list node       next/prev agree both ways round a ring with one sentinel (the list object's own
//                        node, inside its owner or a block of its own) whose size word counts the ring's
//                        nodes
//   std::map/set node    colour, parent, left, right consistent over the whole tree, up to a header whose
//                        parent is the root, left the leftmost node, right the rightmost and whose node
//                        count is the tree's
//   std::unordered_map/set node, buckets   the table object's bucket array (or its single bucket), bucket
//                        count, first node, element count (the chain's length) and load factor
//   std::deque map, chunk  the deque object's map and map size, its start and finish iterators each inside
//                        one chunk the map points to
// A container object that fills a block of its own (`new std::map<…>`) is named too: "std::map/set",
// "std::vector", "std::string", …
#pragma once

#include <span>

#include "heap/heap_model.h"
#include "image/image.h"
#include "model/block_index.h"
#include "types/block_types.h"

namespace heapscope {

// A ring with a list's shape whose sentinel is a block of its own and whose nodes are that block's size: a
// `new std::list<int>` (or of pointers, of longs), or a ring of the program's own nodes one of whose third
// word happens to count the others. The bytes cannot tell; the program's DWARF may (settle_lists_or_rings,
// types/leak_naming.h).
struct ListOrRing {
  BlockId object;              // the block that would be the list object
  std::vector<BlockId> nodes;  // the ring's other blocks, from the object's next on
};

// Names the unnamed blocks among `targets` (a flag per block) whose shape is one of the above, searching
// `owners` (the blocks that may hold a container object or a string) for the objects that own them. With
// `within`, only blocks in it are named, but shapes are checked over every target and owner given, so that
// a container's blocks get the names the whole-heap pass gives them. Returns the rings it left unnamed
// because they may be lists or not (ListOrRing).
std::vector<ListOrRing> name_libstdcxx_shapes(const Image& image, const HeapModel& heap, const BlockIndex& index,
                                              std::span<const BlockId> owners, const std::vector<bool>& targets,
                                              const std::vector<bool>* within, BlockTypes& types);

}  // namespace heapscope
