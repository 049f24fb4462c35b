// BlockTypes keeps an id per block of the heap, or (resize_for) per member of a subset: naming the leaks of a
// large heap needs ids for the leaks alone. Both must answer alike for the members.
#include <algorithm>

#include <catch2/catch.hpp>

#include "types/block_types.h"

using heapscope::BlockId;
using heapscope::BlockTypes;
using heapscope::Naming;

TEST_CASE("ids kept for a subset answer for its members and leave the others unknown", "[types]") {
  // Members in the first and last 64-block words, on both sides of a word boundary, and a lone one.
  const std::vector<BlockId> members = {0, 5, 63, 64, 65, 127, 1000, 4095};
  BlockTypes subset, dense;
  subset.resize_for(4096, members);
  dense.resize(4096);
  const std::uint32_t a = subset.intern("A", Naming::dwarf), b = subset.intern("B", Naming::pattern);
  REQUIRE(dense.intern("A", Naming::dwarf) == a);
  REQUIRE(dense.intern("B", Naming::pattern) == b);
  for (std::size_t i = 0; i < members.size(); ++i) {
    const std::uint32_t id = i % 2 ? a : b;
    subset.set(members[i], id);
    dense.set(members[i], id);
  }
  subset.set(6, a);  // not a member: not kept
  for (BlockId block = 0; block < 4096; ++block) {
    const bool member = std::find(members.begin(), members.end(), block) != members.end();
    INFO("block " << block);
    CHECK(subset.type_id(block) == (member ? dense.type_id(block) : BlockTypes::kUnknown));
  }
  CHECK(subset.type_id(6) == BlockTypes::kUnknown);
  CHECK(subset.type_id(4096) == BlockTypes::kUnknown);  // past the heap
  CHECK(subset.typed_blocks() == members.size());
  CHECK(subset.naming(5) == Naming::dwarf);
  CHECK(subset.naming(63) == Naming::pattern);

  subset.resize(4096);  // back to an id per block: nothing is left of the subset
  CHECK(subset.type_id(0) == BlockTypes::kUnknown);
  subset.set(6, a);
  CHECK(subset.type_id(6) == a);
}

TEST_CASE("type ids stay 2 bytes a block until an id needs more, and keep every id when widened", "[types]") {
  for (const bool subset : {false, true}) {
    INFO((subset ? "subset" : "every block"));
    std::vector<BlockId> members(3000);
    for (BlockId b = 0; b < members.size(); ++b) members[b] = 2 * b;
    BlockTypes types;
    if (subset) types.resize_for(6000, members);
    else types.resize(6000);
    // 70,000 names: ids past 65,535 on the way.
    std::vector<std::uint32_t> given(6000, BlockTypes::kUnknown);
    for (std::uint32_t i = 0; i < 70000; ++i) {
      const std::uint32_t id = types.intern("T" + std::to_string(i), Naming::dwarf);
      const BlockId b = static_cast<BlockId>((i * 7919u) % 6000u) & ~1u;  // even: a member in both cases
      types.set(b, id);
      given[b] = id;
    }
    bool all_kept = true;
    for (BlockId b = 0; b < given.size(); ++b) all_kept = all_kept && types.type_id(b) == given[b];
    CHECK(all_kept);
    CHECK(types.typed_blocks() == static_cast<std::size_t>(std::count_if(given.begin(), given.end(), [](std::uint32_t id) {
            return id != BlockTypes::kUnknown;
          })));
  }
  heapscope::TypeIdArray ids;
  ids.assign(4, 0);
  ids.set(1, 0xffff);
  CHECK_FALSE(ids.wide());
  ids.set(2, 0x10000);
  CHECK(ids.wide());
  CHECK((ids[0] == 0 && ids[1] == 0xffff && ids[2] == 0x10000 && ids[3] == 0));
  CHECK((ids.all_below(0x10001) && !ids.all_below(0x10000)));

  // Viewing saved bytes (the index cache's): read in place, copied before the first id is set, so that
  // the bytes themselves never change.
  const std::vector<std::uint16_t> saved{3, 1, 4, 1};
  const auto bytes = std::as_bytes(std::span(saved));
  heapscope::TypeIdArray viewed = heapscope::TypeIdArray::viewing(false, bytes, nullptr);
  CHECK((viewed.size() == 4 && viewed[2] == 4 && viewed.all_below(5) && !viewed.all_below(4) && viewed.bytes().data() == bytes.data()));
  viewed.set(0, 9);
  CHECK((viewed[0] == 9 && viewed[1] == 1 && saved[0] == 3));
  viewed.set(3, 0x10000);
  CHECK((viewed.wide() && viewed[3] == 0x10000 && viewed[2] == 4 && saved[3] == 1));
  CHECK(heapscope::TypeIdArray::viewing(true, bytes.first(6), nullptr).size() == 0);  // not whole 4-byte ids
}

TEST_CASE("a name interned again gets its lowest id, also after a type is renamed", "[types]") {
  BlockTypes types;
  const std::uint32_t a = types.intern("A", Naming::dwarf), b = types.intern("B", Naming::dwarf);
  CHECK(types.intern("A", Naming::pattern) == a);
  CHECK(types.naming_of(a) == Naming::dwarf);  // the first evidence stays
  types.rename(b, "A");                       // two ids of one name: the lower one answers
  CHECK(types.intern("A", Naming::dwarf) == a);
  types.rename(a, "C");  // "A" now goes by b alone, "C" by a
  CHECK(types.intern("A", Naming::dwarf) == b);
  CHECK(types.intern("C", Naming::dwarf) == a);
  const std::uint32_t fresh = types.intern("B", Naming::dwarf);  // no id has "B" any more
  CHECK(fresh != a);
  CHECK(fresh != b);
  CHECK(types.name_of(fresh) == "B");
  CHECK(types.type_count() == 4);
}
