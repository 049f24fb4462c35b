#include "runtime/jemalloc/jemalloc_extent_map.h"

#include <unordered_set>
#include <vector>

namespace heapscope::jemalloc {

bool for_each_extent(const Image& image, const Runtime& rt,
                     const std::function<void(Address edata, Address page, const LeafEntry& entry)>& visit,
                     const std::function<void(Address leaf)>& unreadable) {
  constexpr std::size_t kRootLength = std::size_t{1} << RtreeLayout::kRootBits;
  constexpr std::size_t kLeafLength = std::size_t{1} << RtreeLayout::kLeafBits;
  std::vector<std::uint64_t> root(kRootLength);
  if (!image.read_exact(rt.emap + rt.layout->rtree.root, root.data(), root.size() * 8)) return false;
  std::vector<std::uint64_t> leaf(kLeafLength);
  std::unordered_set<Address> seen;
  for (std::size_t i = 0; i < kRootLength; ++i) {
    if (!root[i]) continue;
    if (!image.read_exact(root[i], leaf.data(), leaf.size() * 8)) {
      unreadable(root[i]);
      continue;
    }
    Address previous = 0;
    for (std::size_t j = 0; j < kLeafLength; ++j) {
      if (!leaf[j]) continue;
      const LeafEntry entry = decode_leaf(leaf[j]);
      if (!entry.edata || entry.edata == previous) continue;
      previous = entry.edata;
      if (!seen.insert(entry.edata).second) continue;
      visit(entry.edata, ((std::uint64_t{i} << RtreeLayout::kLeafBits) | j) << kPageShift, entry);
    }
  }
  return true;
}

}  // namespace heapscope::jemalloc
