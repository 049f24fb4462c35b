#include "runtime/glibc/chunk_walk.h"

#include <fmt/format.h>

#include "base/progress.h"

namespace heapscope::glibc {

namespace {

Block make_block(Address chunk, std::uint64_t size, BlockState state, std::uint16_t arena) {
  Block b;
  b.chunk = chunk;
  b.size_units = static_cast<std::uint32_t>(size / 16);
  b.state = state;
  b.arena = arena;
  return b;
}

}  // namespace

SegmentWalk walk_segment(MemoryCursor& mem, Address first_chunk, Address end, Address top, std::uint16_t arena,
                         BlockSink& sink, Address limit) {
  SegmentWalk out;
  auto emit = [&](Block b) {
    sink.push(b);  // cannot overflow: the sink holds max_chunks(first_chunk, end)
    out.blocks = sink.count;
    out.totals[static_cast<int>(b.state)].add(b.chunk_size());
  };
  Address last_good = 0;
  auto stop = [&](Address at, const std::string& what) {
    out.stopped_at = at;
    out.last_good = last_good;
    out.warnings.push_back(fmt::format("heap damage at chunk 0x{:x}: {} (last good chunk: {}); the rest of "
                                       "this heap (0x{:x} bytes) is skipped",
                                       at, what, last_good ? fmt::format("0x{:x}", last_good) : "none",
                                       end > at ? end - at : 0));
  };

  // Progress in bytes of the segment, told every kProgressChunks chunks (throws Interrupted on Ctrl-C).
  constexpr std::uint32_t kProgressChunks = 16384;
  std::uint32_t chunks_since = 0;
  Address told = first_chunk;
  Address c = first_chunk;
  while (c + 16 <= end) {
    if (limit && c >= limit) {
      out.next_chunk = c;
      return out;
    }
    if (++chunks_since == kProgressChunks) {
      progress_step(c - told);
      told = c;
      chunks_since = 0;
    }
    const auto size_field = mem.u64(c + 8);
    if (!size_field) {
      stop(c, "its header is not in the image");
      return out;
    }
    const std::uint64_t size = *size_field & ~kFlagMask;
    if (c == top) {
      if (size < 16 || size > end - c) {
        stop(c, fmt::format("top chunk size 0x{:x} does not fit the heap", size));
        return out;
      }
      emit(make_block(c, size, BlockState::top, arena));
      out.overhead_bytes += end - c - size;  // the sbrk heap may extend past top by an unused tail
      out.reached_end = true;
      return out;
    }
    if (size == 0 || (size == 16 && c + 16 < end && (mem.u64(c + 16 + 8).value_or(1) & ~kFlagMask) == 0)) {
      // glibc's fencepost pair at the end of a heap its arena has moved on from: a 16-byte chunk, then a
      // header of size 0. Everything from here to the heap's end is overhead, not chunks.
      out.overhead_bytes += end - c;
      out.reached_end = true;
      return out;
    }
    if (size < kMinChunkSize || (size & 15) || size > end - c) {
      stop(c, fmt::format("size field 0x{:x} is not a valid chunk size here", *size_field));
      return out;
    }
    const Address next = c + size;
    if (next + 16 > end) {
      stop(c, "it ends where no further header fits, without reaching the top chunk");
      return out;
    }
    const auto next_field = mem.u64(next + 8);
    if (!next_field) {
      stop(next, "its header is not in the image");
      return out;
    }
    if ((*next_field & ~kFlagMask) == 0 && next != top) {
      // The short fencepost form: an old top too small to free became one in-use-looking chunk.
      out.overhead_bytes += end - c;
      out.reached_end = true;
      return out;
    }
    const BlockState state = (*next_field & kPrevInUse) ? BlockState::in_use : BlockState::free;
    emit(make_block(c, size, state, arena));
    last_good = c;
    c = next;
  }
  if (c == end) out.reached_end = true;
  else stop(c, "the heap ends inside a chunk header");
  return out;
}

}  // namespace heapscope::glibc
