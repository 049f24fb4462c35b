// musl's malloc (mallocng, musl 1.2.1 and later; learnt from 1.2.3's src/malloc/mallocng) and its thread
// descriptor as heapscope reads them on x86-64. Nothing here is trusted unchecked: musl_runtime and
// musl_heap check every structure they read with it.
//
// mallocng keeps its bookkeeping out of band: one malloc context (`__malloc_context`, hidden), meta areas
// (pages whose first word is the context's random secret) holding `struct meta` records, one per group; a
// group is a run of equal slots of one size class behind a 16-byte header that points back at its meta.
// Each slot in use carries a 4-byte in-band header right before what malloc returned.
#pragma once

#include <array>
#include <cstdint>

#include "runtime/struct_bytes.h"

namespace heapscope::musl {

inline constexpr std::uint64_t kUnit = 16;        // UNIT: slots and groups are laid out in 16-byte units
inline constexpr std::uint64_t kInbandBytes = 4;  // IB: the in-band header before each object
inline constexpr std::uint64_t kPageBytes = 4096;
inline constexpr unsigned kSizeClasses = 48;
inline constexpr unsigned kMmapClass = 63;  // an individually mmapped allocation (over 128 KiB)
inline constexpr std::uint64_t kMaxSlots = 32;  // a group's slots are bits of a 32-bit mask

// Each size class's slot size in 16-byte units (mallocng's size_classes table).
inline constexpr std::array<std::uint16_t, kSizeClasses> kClassUnits = {
    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   12,   15,   18,   20,   25,   31,
    36,   42,   50,   63,   72,   84,   102,  127,  146,  170,  204,  255,  292,  340,  409,  511,
    584,  682,  818,  1023, 1169, 1364, 1637, 2047, 2340, 2730, 3276, 4095, 4680, 5460, 6552, 8191};

// struct malloc_context (x86-64 defines PAGESIZE, so it has no pagesize field).
struct ContextLayout {
  std::uint64_t secret = 0;             // uint64: random, from AT_RANDOM's second 8 bytes
  std::uint64_t init_done = 8;          // int
  std::uint64_t mmap_counter = 12;      // unsigned: mappings made, ever (cycles offsets)
  std::uint64_t free_meta_head = 16;    // struct meta*: metas freed for reuse (zeroed, circular)
  std::uint64_t avail_meta = 24;        // struct meta*: the next never-used meta of the newest area
  std::uint64_t avail_meta_count = 32;  // size_t
  std::uint64_t meta_area_head = 56;    // struct meta_area*: every area, linked through `next`
  std::uint64_t meta_area_tail = 64;
  std::uint64_t active = 80;            // struct meta*[48]: each class's circular list of groups
  std::uint64_t usage_by_class = 464;   // size_t[48]: slots in the class's groups
  std::uint64_t brk = 920;              // uintptr: where meta areas end in the brk area, or -1
  std::uint64_t size = 928;
};

// struct meta (40 bytes): a group's record, in a meta area.
struct MetaLayout {
  std::uint64_t prev = 0, next = 8;  // its class's active list (null when on none)
  std::uint64_t mem = 16;            // struct group*: null for a free meta
  std::uint64_t avail_mask = 24;     // int: slots ready to hand out
  std::uint64_t freed_mask = 28;     // int: slots freed (or not yet activated)
  std::uint64_t bits = 32;           // last_idx:5, freeable:1, sizeclass:6, maplen:52 (pages, 0: nested)
  std::uint64_t size = 40;
};

struct MetaBits {
  unsigned last_idx = 0;  // slots - 1
  bool freeable = false;  // false for memory donated by the dynamic linker
  unsigned sizeclass = 0;
  std::uint64_t maplen = 0;  // pages of its own mapping; 0 when the group lives in another group's slot
};
inline MetaBits decode_meta_bits(std::uint64_t word) {
  return {static_cast<unsigned>(word & 31), ((word >> 5) & 1) != 0, static_cast<unsigned>((word >> 6) & 63),
          word >> 12};
}

// struct meta_area: one page of metas, its first word the context's secret.
struct MetaAreaLayout {
  std::uint64_t check = 0;   // uint64: == ctx.secret
  std::uint64_t next = 8;    // struct meta_area*
  std::uint64_t nslots = 16;  // int
  std::uint64_t slots = 24;   // struct meta[nslots]
  static constexpr std::uint64_t kBytes = 4096;
  static constexpr std::uint64_t kSlots = (kBytes - 24) / 40;  // 101
};

// struct group: 16 bytes before its slots.
struct GroupLayout {
  std::uint64_t meta = 0;        // struct meta*: points back at its meta
  std::uint64_t active_idx = 8;  // low 5 bits: the last slot activated
  std::uint64_t storage = 16;    // the first slot
};

// The in-band header: the 4 bytes before what malloc returned (and before each slot's start).
struct SlotHeader {
  std::uint8_t check = 0;    // 0; nonzero when a 32-bit offset lies 8 bytes before the object
  std::uint8_t index = 0;    // low 5 bits: the slot's index; high 3: reserved bytes (5: a 32-bit count at the
                             // slot's end; 6: the slot holds a nested group; 7: at a slot's start, the object
                             // lies `offset` units further on)
  std::uint16_t offset = 0;  // units from the group's storage to the object (freed: 0)
  unsigned slot() const { return index & 31u; }
  unsigned reserved_code() const { return index >> 5; }
};
inline SlotHeader slot_header(const std::uint8_t* four_bytes) {
  return {four_bytes[0], four_bytes[1], u16_at(four_bytes, 2)};
}
inline constexpr unsigned kReservedCounted = 5;  // the reserved byte count is a uint32 at the slot's end
inline constexpr unsigned kNestedGroup = 6;      // the slot is a smaller class's group
inline constexpr unsigned kOffsetMarker = 7;     // the object starts `offset` units into the slot

// struct pthread (musl 1.2.x, x86-64: TLS below the thread pointer, which points at the descriptor).
struct ThreadLayout {
  std::uint64_t self = 0;        // struct pthread*: itself
  std::uint64_t dtv = 8;         // uintptr_t*: dtv[0] the module count, dtv[i] module i's TLS block
  std::uint64_t prev = 16, next = 24;  // the circular list of live threads
  std::uint64_t tid = 48;        // int
  std::uint64_t detach_state = 56;
  std::uint64_t map_base = 72;   // unsigned char*: the mapping of its stack, TLS and key values; null for
                                 // the main thread
  std::uint64_t map_size = 80;
  std::uint64_t stack = 88;      // void*: the stack's top; its TLS area starts there
  std::uint64_t stack_size = 96;
  std::uint64_t tsd = 128;       // void**: its pthread key values
  std::uint64_t size = 200;
};

}  // namespace heapscope::musl
