#pragma once

#include <string>
#include <vector>

#include "heap/heap_model.h"

namespace heapscope {

struct BlocksReport {
  std::vector<Block> blocks;             // the selected blocks, in address order
  std::vector<Address> arena_addresses;  // Block::arena indexes this
  std::string selection;                 // e.g. "used blocks of at least 64 bytes"
  std::uint64_t matched = 0;             // blocks the selection matched; more than listed under --limit
  // Filled when the selection is by leak verdict: per listed block, its verdict name and possibly flag.
  std::vector<const char*> verdicts;
  std::vector<bool> possibly;
  // Per listed block, an index into type_names (0: unknown, shown as "unknown (N bytes)"); empty when no
  // listed block is allocated.
  std::vector<std::uint32_t> type_ids;
  std::vector<std::string> type_names;
  std::vector<std::string> type_namings;  // per type_names entry: its evidence (BlockRef::naming)
  std::vector<std::string> texts;         // per listed block: the text it starts with (escaped), or empty
  std::vector<std::string> warnings;

  Address arena_of(const Block& b) const {
    return b.arena < arena_addresses.size() ? arena_addresses[b.arena] : 0;
  }
};

}  // namespace heapscope
