// Walking the chunks of one contiguous heap segment by their size fields.
#pragma once

#include <string>
#include <vector>

#include "heap/glibc/glibc_layout.h"
#include "heap/heap_model.h"
#include "image/memory_cursor.h"

namespace heapscope::glibc {

struct SegmentWalk {
  std::vector<Block> blocks;        // in address order; states in_use / free / top only
  std::uint64_t overhead_bytes = 0;  // fenceposts and the unused tail after them
  bool reached_end = false;          // the walk accounted for every byte up to the segment end
  std::vector<std::string> warnings;
};

// Walks chunks from `first_chunk` until `end`. A chunk is in use when the next chunk's PREV_INUSE bit is
// set; the chunk at `top` is the top chunk and ends the walk. In a heap that is not its arena's newest,
// the walk ends at the fencepost glibc writes when it moves on to a new heap. Damage (a size that is not
// a multiple of 16, too small, or running past the end) stops the walk with a warning naming the last
// good chunk; it never loops: every step moves forward by at least the minimum chunk size.
SegmentWalk walk_segment(MemoryCursor& mem, Address first_chunk, Address end, Address top, std::uint16_t arena);

}  // namespace heapscope::glibc
