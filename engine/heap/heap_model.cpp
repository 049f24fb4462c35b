#include "heap/heap_model.h"

#include <algorithm>

namespace heapscope {

StateTotals HeapModel::totals() const {
  StateTotals sum{};
  for (const ArenaInfo& a : arenas)
    for (int s = 0; s < kBlockStateCount; ++s) {
      sum[s].blocks += a.totals[s].blocks;
      sum[s].bytes += a.totals[s].bytes;
    }
  sum[static_cast<int>(BlockState::mmapped)] = mmapped_chunks;
  return sum;
}

const Block* HeapModel::block_containing(Address addr) const {
  auto it = std::upper_bound(blocks.begin(), blocks.end(), addr,
                             [](Address a, const Block& b) { return a < b.chunk; });
  if (it == blocks.begin()) return nullptr;
  --it;
  return addr < it->chunk + it->chunk_size() ? &*it : nullptr;
}

}  // namespace heapscope
