// Block: one malloc chunk or object, as compact as the pointer scan of millions of them needs.
#pragma once

#include <cstdint>

#include "image/image.h"

namespace heapscope {

enum class BlockState : std::uint8_t {
  in_use,   // allocated from an arena
  mmapped,  // allocated, in a mapping of its own
  free,     // in a regular bin (unsorted, small, large); tcmalloc: on a span's (central) free list, or a
            // free span of the page heap
  tcache,   // cached in a thread's tcache (free to the program, "in use" to the arena); tcmalloc: in a
            // thread cache or a transfer cache
  fastbin,  // in an arena's fastbin (likewise)
  top,      // the arena's top chunk
};
inline constexpr int kBlockStateCount = 6;
inline const char* block_state_name(BlockState s) {  // the names JSON and text output use
  constexpr const char* kNames[kBlockStateCount] = {"in_use", "mmapped", "free", "tcache", "fastbin", "top"};
  return kNames[static_cast<int>(s)];
}
inline bool is_allocated(BlockState s) { return s == BlockState::in_use || s == BlockState::mmapped; }

// How a block lies in memory, which sets what its address, sizes and units mean.
enum class BlockLayout : std::uint8_t {
  // glibc's chunk: a 16-byte header (prev_size, size) before the user bytes; sizes in 16-byte units; an
  // allocated chunk may also use the next chunk's prev_size word.
  glibc_chunk = 0,
  // No header (tcmalloc's size-class objects and page spans): the block is the object, every byte of it
  // usable; sizes in 8-byte units.
  bare = 1,
  // A 4-byte header right before the object (musl's mallocng slots: its slot index, offset and reserved
  // bytes): the block starts at the header, sizes in 16-byte units, and everything after the header is
  // usable — the slot's room, which may exceed what was asked for (mallocng records that apart).
  inband = 2,
};

// 16 bytes per block: 5 million blocks index in 80 MB. Sizes are stored in units of the layout (16 bytes
// for glibc chunks, which covers chunks up to 64 GiB; 8 bytes for headerless blocks, up to 32 GiB).
struct Block {
  Address chunk = 0;                  // where the block starts: the chunk header, or the object (bare)
  std::uint32_t size_units = 0;       // chunk size / unit_bytes()
  BlockState state = BlockState::in_use;
  BlockLayout layout : 2 = BlockLayout::glibc_chunk;
  // The runtime says the block holds no pointers (a collector's atomic objects: it never scans them, so a
  // word there that looks like a pointer keeps nothing alive): the pointer scan reads none of its words.
  bool pointer_free : 1 = false;
  // The collector never frees it, reached or not, and scans it as a root of its heap (Boehm GC's
  // uncollectable objects): unreached, it is a leak, not garbage the next collection frees.
  bool uncollectable : 1 = false;
  std::uint16_t arena = 0;            // index into HeapModel::arenas; kNoArena for mmapped blocks

  static constexpr std::uint16_t kNoArena = 0xffff;
  static constexpr std::uint64_t kHeaderSize = 16;  // a glibc chunk's header
  static constexpr std::uint64_t kMaxBareBytes = std::uint64_t{0xffffffff} * 8;

  // A headerless block of `bytes` (a multiple of 8, at most kMaxBareBytes) at `at`.
  static Block bare(Address at, std::uint64_t bytes, BlockState state, std::uint16_t arena) {
    return laid_out(at, bytes / 8, state, BlockLayout::bare, arena);
  }
  // A block of `bytes` (a multiple of 16) whose 4-byte in-band header is at `header`: the object starts
  // right after it.
  static Block inband(Address header, std::uint64_t bytes, BlockState state, std::uint16_t arena) {
    return laid_out(header, bytes / 16, state, BlockLayout::inband, arena);
  }
  static Block laid_out(Address chunk, std::uint64_t units, BlockState state, BlockLayout layout,
                        std::uint16_t arena) {
    Block b;
    b.chunk = chunk;
    b.size_units = static_cast<std::uint32_t>(units);
    b.state = state;
    b.layout = layout;
    b.arena = arena;
    return b;
  }

  static constexpr std::uint64_t kInbandHeaderSize = 4;

  bool is_bare() const { return layout == BlockLayout::bare; }
  bool is_inband() const { return layout == BlockLayout::inband; }
  std::uint64_t header_bytes() const {
    return is_bare() ? 0 : is_inband() ? kInbandHeaderSize : kHeaderSize;
  }
  std::uint64_t unit_bytes() const { return is_bare() ? 8 : 16; }
  Address address() const { return chunk + header_bytes(); }  // what malloc returned
  std::uint64_t chunk_size() const { return std::uint64_t{size_units} * unit_bytes(); }
  Address chunk_end() const { return chunk + chunk_size(); }  // where the next chunk starts
  // malloc_usable_size(): an allocated glibc chunk may also use the next chunk's prev_size word; a
  // headerless block is all usable; an in-band header's block all but its header.
  std::uint64_t usable_size() const {
    if (is_bare()) return chunk_size();
    if (is_inband()) return chunk_size() - kInbandHeaderSize;
    return chunk_size() - (state == BlockState::mmapped ? 16 : 8);
  }
  Address user_end() const { return address() + usable_size(); }  // one past the last usable byte
};
static_assert(sizeof(Block) == 16);

}  // namespace heapscope
