// The allocator-neutral result of walking a heap: every chunk as a compact Block, grouped into arenas.
// An allocator walker (engine/heap/<allocator>/) fills a HeapModel; roots, graph and analyses read it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

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
  // malloc_usable_size(): an allocated chunk may also use the next chunk's prev_size word.
  std::uint64_t usable_size() const { return chunk_size() - (state == BlockState::mmapped ? 16 : 8); }
};
static_assert(sizeof(Block) == 16);

struct StateTotal {
  std::uint64_t blocks = 0;
  std::uint64_t bytes = 0;  // chunk bytes, headers included
  void add(std::uint64_t chunk_bytes) {
    ++blocks;
    bytes += chunk_bytes;
  }
};
using StateTotals = std::array<StateTotal, kBlockStateCount>;

struct HeapSegment {  // one contiguous piece of an arena (the sbrk heap, or one heap_info heap)
  Address start = 0;
  Address end = 0;
};

struct ArenaInfo {
  Address address = 0;             // the malloc_state
  bool is_main = false;
  std::vector<HeapSegment> heaps;  // in address order
  std::uint64_t system_bytes = 0;  // the arena's own system_mem counter
  std::uint64_t overhead_bytes = 0;  // heap_info/arena headers, alignment, fenceposts: not chunks
  StateTotals totals{};
  bool complete = true;            // false when the walk had to stop early (damage, missing memory)
};

// How a structure was located: shown by `summary` so users can tell what rested on debug symbols.
struct Discovery {
  std::string structure;  // "main_arena", "mp_", "tcache", "arena", "heap", "mmapped chunks"
  Address address = 0;
  std::string method;     // "debug-symbol", "relocation", "scan", "tls-got", "arena-ring", ...
};

// glibc's mallinfo2() as the walk computes it (same field meanings).
struct MallInfo {
  std::uint64_t arena = 0, ordblks = 0, smblks = 0, hblks = 0, hblkhd = 0, usmblks = 0, fsmblks = 0,
                uordblks = 0, fordblks = 0, keepcost = 0;
};

struct HeapModel {
  std::string allocator;       // "glibc"
  std::string version;         // "2.36", or empty when unknown
  std::vector<Block> blocks;   // sorted by chunk address
  std::vector<ArenaInfo> arenas;
  StateTotal mmapped_total;    // mapping bytes (alignment lead included), what mallinfo2's hblkhd counts
  std::vector<Discovery> discovery;
  std::vector<std::string> warnings;
  MallInfo mallinfo;
  bool complete = true;

  StateTotals totals() const;
  // The block whose chunk contains addr (header or user bytes), or null. O(log n).
  const Block* block_containing(Address addr) const;
};

}  // namespace heapscope
