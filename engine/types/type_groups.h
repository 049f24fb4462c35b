// Dense ids for the names blocks go by in reports: one per BlockTypes type, and one "unknown (N bytes)" per
// usable size, so that untyped blocks of one size (a C list's nodes) count as one type. Lookups are table
// reads for all but huge untyped blocks, since analyses look every block up.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/progress.h"
#include "base/workers.h"
#include "model/block_index.h"
#include "heap/heap_model.h"
#include "types/block_types.h"

namespace heapscope {

class TypeGroups {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  TypeGroups(const HeapModel& heap, const BlockTypes& types) : heap_(heap), types_(types) {}

  // The block's group, numbered when it is the first of its type or size.
  std::uint32_t of(BlockId b) {
    const std::uint32_t group = numbered_group(b);
    return group != kNone ? group : number(b);
  }
  // The group of() gave a block of the same type or size, read only (safe from several threads at once);
  // kNone when no such block has been given one yet.
  std::uint32_t numbered_group(BlockId b) const;
  // Whether two blocks are in one group (what of() says of both), without numbering either.
  bool same(BlockId a, BlockId b) const {
    const std::uint32_t typed = types_.type_id(a);
    if (typed != types_.type_id(b)) return false;
    return typed != BlockTypes::kUnknown || heap_.blocks[a].usable_size() == heap_.blocks[b].usable_size();
  }
  std::string name(std::uint32_t group) const;

  // Numbers the groups of the blocks [0, count) where keep(b) holds as of() on each, in block order, would
  // (a group's number is its first block's rank), on all cores: each worker finds the first block of each
  // group in its slice, and those are numbered slice by slice.
  template <typename Keep>
  void number_in_block_order(std::size_t count, Keep keep);

 private:
  static constexpr std::size_t kDirectSizes = std::size_t{1} << 16;

  // Where a block's group is kept: under its type, or under its usable size (in 8-byte steps in a table
  // while small, as the size itself in a map when huge). Blocks with one key are one group.
  struct Key {
    enum class Table : std::uint8_t { typed, small_size, large_size } table;
    std::uint64_t value;
  };
  Key key_of(BlockId b) const {
    if (const std::uint32_t typed = types_.type_id(b); typed != BlockTypes::kUnknown) return {Key::Table::typed, typed};
    const std::uint64_t size = heap_.blocks[b].usable_size();
    if (size / 8 < kDirectSizes) return {Key::Table::small_size, size / 8};
    return {Key::Table::large_size, size};
  }
  std::uint32_t number(BlockId b);  // a new group for b's type or size
  std::uint32_t slot(std::vector<std::uint32_t>& table, std::size_t i, BlockId b);

  const HeapModel& heap_;
  const BlockTypes& types_;
  std::vector<std::uint32_t> by_type_, by_small_size_;
  std::unordered_map<std::uint64_t, std::uint32_t> by_large_size_;
  std::vector<BlockId> examples_;  // a block of each group, for its name
};

template <typename Keep>
void TypeGroups::number_in_block_order(std::size_t count, Keep keep) {
  const unsigned n = worker_count(count, kBlocksPerWorker);
  std::vector<std::vector<BlockId>> firsts(n);
  run_workers(n, [&](unsigned w) {
    std::vector<bool> typed(types_.type_count(), false), small(kDirectSizes, false);
    std::unordered_set<std::uint64_t> large;
    // Whether a block of this key came earlier in the slice; marks it as come.
    auto seen = [&](const Key& key) {
      if (key.table == Key::Table::large_size) return !large.insert(key.value).second;
      auto&& flag = (key.table == Key::Table::typed ? typed : small)[key.value];
      const bool before = flag;
      flag = true;
      return before;
    };
    const auto [first, last] = slice_of(count, n, w);
    for (std::size_t b = first; b < last; ++b) {
      if ((b & kCheckMask) == 0) progress_check();
      if (keep(static_cast<BlockId>(b)) && !seen(key_of(static_cast<BlockId>(b)))) firsts[w].push_back(static_cast<BlockId>(b));
    }
  });
  for (const std::vector<BlockId>& slice : firsts)
    for (const BlockId b : slice) of(b);
}

// Every block's group where `keep(b)` holds, TypeGroups::kNone elsewhere: one sequential pass.
template <typename Keep>
std::vector<std::uint32_t> group_per_block(TypeGroups& groups, std::size_t block_count, Keep keep) {
  std::vector<std::uint32_t> out(block_count, TypeGroups::kNone);
  for (BlockId b = 0; b < block_count; ++b)
    if (keep(b)) out[b] = groups.of(b);
  return out;
}

}  // namespace heapscope
