#include "types/type_groups.h"

namespace heapscope {

std::uint32_t TypeGroups::number(BlockId b) {
  const Key key = key_of(b);
  switch (key.table) {
    case Key::Table::typed: return slot(by_type_, key.value, b);
    case Key::Table::small_size: return slot(by_small_size_, key.value, b);
    case Key::Table::large_size: break;
  }
  auto [it, fresh] = by_large_size_.try_emplace(key.value, static_cast<std::uint32_t>(examples_.size()));
  if (fresh) examples_.push_back(b);
  return it->second;
}

std::uint32_t TypeGroups::numbered_group(BlockId b) const {
  const auto in = [](const std::vector<std::uint32_t>& table, std::size_t i) { return i < table.size() ? table[i] : kNone; };
  const Key key = key_of(b);
  switch (key.table) {
    case Key::Table::typed: return in(by_type_, key.value);
    case Key::Table::small_size: return in(by_small_size_, key.value);
    case Key::Table::large_size: break;
  }
  const auto it = by_large_size_.find(key.value);
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
