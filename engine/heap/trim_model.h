// What an allocator's own trimming would give back to the system from one arena, and the live chunks that
// stand in its way. Each allocator knows its rules (LocatedAllocator::arena_trim); the fragmentation query
// reports what they say, beside the allocator-neutral counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace heapscope {

struct TrimBlockerEstimate {
  std::uint32_t block = 0;                // index into HeapModel::blocks
  std::uint64_t bytes_above = 0;          // from its chunk to the end of its heap
  std::uint64_t returnable_if_freed = 0;  // what trimming would return more, were it and those above freed
};

struct ArenaTrim {
  // Returned to the system by the trim the allocator runs by itself on free, were it to run now.
  std::uint64_t on_free = 0;
  // An explicit trim (glibc: malloc_trim(0)): returned to the system from the heap's end, and handed back
  // inside free chunks (madvise: resident memory drops, the arena's system bytes do not).
  std::uint64_t explicit_returned = 0;
  std::uint64_t explicit_madvised = 0;
  std::vector<TrimBlockerEstimate> blockers;  // nearest the heap's end first
  std::vector<std::string> warnings;          // assumptions made (settings the walk could not read)
};

}  // namespace heapscope
