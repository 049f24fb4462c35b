// Block: one malloc chunk, as compact as the pointer scan of millions of them needs.
#pragma once

#include <cstdint>

#include "image/image.h"

namespace heapscope {

enum class BlockState : std::uint8_t {
  in_use,   // allocated from an arena
  mmapped,  // allocated, in a mapping of its own
  free,     // in a regular bin (unsorted, small, large)
  tcache,   // cached in a thread's tcache (free to the program, "in use" to the arena)
  fastbin,  // in an arena's fastbin (likewise)
  top,      // the arena's top chunk
};
inline constexpr int kBlockStateCount = 6;
inline const char* block_state_name(BlockState s) {  // the names JSON and text output use
  constexpr const char* kNames[kBlockStateCount] = {"in_use", "mmapped", "free", "tcache", "fastbin", "top"};
  return kNames[static_cast<int>(s)];
}
inline bool is_allocated(BlockState s) { return s == BlockState::in_use || s == BlockState::mmapped; }

// 16 bytes per block: 5 million blocks index in 80 MB. Sizes are stored in 16-byte units (glibc chunk
// sizes are multiples of 16), which covers chunks up to 64 GiB.
struct Block {
  Address chunk = 0;                  // address of the chunk header
  std::uint32_t size_units = 0;       // chunk size / 16
  BlockState state = BlockState::in_use;
  std::uint8_t reserved = 0;
  std::uint16_t arena = 0;            // index into HeapModel::arenas; kNoArena for mmapped blocks

  static constexpr std::uint16_t kNoArena = 0xffff;
  static constexpr std::uint64_t kHeaderSize = 16;

  Address address() const { return chunk + kHeaderSize; }  // what malloc returned
  std::uint64_t chunk_size() const { return std::uint64_t{size_units} * 16; }
  Address chunk_end() const { return chunk + chunk_size(); }  // where the next chunk starts
  // malloc_usable_size(): an allocated chunk may also use the next chunk's prev_size word.
  std::uint64_t usable_size() const { return chunk_size() - (state == BlockState::mmapped ? 16 : 8); }
};
static_assert(sizeof(Block) == 16);

}  // namespace heapscope
