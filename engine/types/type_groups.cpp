#include "types/type_groups.h"

namespace heapscope {

std::uint32_t TypeGroups::number(BlockId b) {
  if (const std::uint32_t typed = types_.type_id(b); typed != BlockTypes::kUnknown) return slot(by_type_, typed, b);
  const std::uint64_t size = heap_.blocks[b].usable_size();
  if (size / 8 < kDirectSizes) return slot(by_small_size_, size / 8, b);
  auto [it, fresh] = by_large_size_.try_emplace(size, static_cast<std::uint32_t>(examples_.size()));
  if (fresh) examples_.push_back(b);
  return it->second;
}

std::uint32_t TypeGroups::numbered_group(BlockId b) const {
  const auto in = [](const std::vector<std::uint32_t>& table, std::size_t i) { return i < table.size() ? table[i] : kNone; };
  if (const std::uint32_t typed = types_.type_id(b); typed != BlockTypes::kUnknown) return in(by_type_, typed);
  const std::uint64_t size = heap_.blocks[b].usable_size();
  if (size / 8 < kDirectSizes) return in(by_small_size_, size / 8);
  const auto it = by_large_size_.find(size);
  return it == by_large_size_.end() ? kNone : it->second;
}

std::string TypeGroups::name(std::uint32_t group) const {
  const BlockId b = examples_[group];
  return types_.name(b, heap_.blocks[b]);
}

std::uint32_t TypeGroups::slot(std::vector<std::uint32_t>& table, std::size_t i, BlockId b) {
  if (i >= table.size()) table.resize(i + 1, kNone);
  if (table[i] == kNone) {
    table[i] = static_cast<std::uint32_t>(examples_.size());
    examples_.push_back(b);
  }
  return table[i];
}

}  // namespace heapscope
