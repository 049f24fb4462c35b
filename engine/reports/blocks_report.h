#pragma once

#include <string>
#include <vector>

#include "heap/heap_model.h"

namespace heapscope {

struct BlocksReport {
  std::vector<Block> blocks;             // the selected blocks, in address order
  std::vector<Address> arena_addresses;  // Block::arena indexes this
  std::string selection;                 // e.g. "used blocks of at least 64 bytes"
  std::vector<std::string> warnings;

  Address arena_of(const Block& b) const {
    return b.arena < arena_addresses.size() ? arena_addresses[b.arena] : 0;
  }
};

}  // namespace heapscope
