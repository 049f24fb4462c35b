#include "model/compact_offsets.h"

#include <algorithm>
#include <tuple>

namespace heapscope {

CompactOffsets::CompactOffsets(std::span<const std::uint32_t> offsets)
    : items_(offsets.empty() ? 0 : offsets.size() - 1) {
  lines_.resize((items_ + kPerLine - 1) / kPerLine);
  for (std::size_t l = 0; l < lines_.size(); ++l) {
    Line& line = lines_[l];
    const std::size_t first = l * kPerLine, last = std::min(items_, first + kPerLine);
    line.first = offsets[first];
    bool narrow = true;
    for (std::size_t i = first; i < last && narrow; ++i) narrow = offsets[i + 1] - offsets[i] <= 0xff;
    if (narrow) {
      for (std::size_t i = first; i < last; ++i) line.count[i - first] = static_cast<std::uint8_t>(offsets[i + 1] - offsets[i]);
      continue;
    }
    line.wide = static_cast<std::uint32_t>(wide_.size() / (kPerLine + 1));
    for (std::size_t k = 0; k <= kPerLine; ++k) wide_.push_back(offsets[std::min(first + k, items_)]);
  }
}

std::vector<std::uint32_t> CompactOffsets::expand() const {
  std::vector<std::uint32_t> out(items_ + 1, 0);
  for (std::size_t i = 0; i < items_; ++i) std::tie(out[i], out[i + 1]) = range(i);
  return out;
}

}  // namespace heapscope
