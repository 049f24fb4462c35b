// Walking the chunks of one contiguous heap segment by their size fields.
#pragma once

#include <string>
#include <vector>

#include "runtime/glibc/glibc_layout.h"
#include "heap/heap_model.h"
#include "image/memory_cursor.h"

namespace heapscope::glibc {

// Where a walk puts its blocks: a slice of the model's BlockArray (or any buffer in tests).
struct BlockSink {
  Block* data = nullptr;
  std::size_t capacity = 0;
  std::size_t count = 0;
  bool push(const Block& b) {
    if (count == capacity) return false;
    data[count++] = b;
    return true;
  }
};

// Enough room for every chunk of [first_chunk, end) even if all have the minimum size.
inline std::size_t max_chunks(Address first_chunk, Address end) {
  return end > first_chunk ? (end - first_chunk) / kMinChunkSize + 1 : 1;
}

struct SegmentWalk {
  std::size_t blocks = 0;            // how many went to the sink (states in_use / free / top only)
  StateTotals totals{};              // those blocks by state, counted as they are found (one pass fewer)
  std::uint64_t overhead_bytes = 0;  // fenceposts and the unused tail after them
  bool reached_end = false;          // the walk accounted for every byte up to the segment end
  Address stopped_at = 0;            // the damaged chunk where the walk stopped (0: it did not stop at damage)
  Address last_good = 0;             // the last chunk walked before stopped_at (0: none)
  Address next_chunk = 0;            // with a limit: the first chunk at or past it, where the walk stopped
  std::vector<std::string> warnings;
};

// Walks chunks from `first_chunk` until `end`. A chunk is in use when the next chunk's PREV_INUSE bit is
// set; the chunk at `top` is the top chunk and ends the walk. In a heap that is not its arena's newest,
// the walk ends at the fencepost glibc writes when it moves on to a new heap. Damage (a size that is not
// a multiple of 16, too small, or running past the end) stops the walk with a warning naming the last
// good chunk; it never loops: every step moves forward by at least the minimum chunk size. With a `limit`,
// the walk stops at the first chunk that starts at or past it (next_chunk): a slice of a heap walked
// beside the others (sliced_walk.h).
SegmentWalk walk_segment(MemoryCursor& mem, Address first_chunk, Address end, Address top, std::uint16_t arena,
                         BlockSink& sink, Address limit = 0);

}  // namespace heapscope::glibc
