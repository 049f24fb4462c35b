#include <catch2/catch.hpp>

#include <optional>
#include <random>
#include <vector>

#include "model/compact_offsets.h"

using namespace heapscope;

namespace {

// Offsets for `counts` entries per item: items + 1 values.
std::vector<std::uint32_t> offsets_of(const std::vector<std::uint32_t>& counts) {
  std::vector<std::uint32_t> offsets{0};
  for (const std::uint32_t c : counts) offsets.push_back(offsets.back() + c);
  return offsets;
}

void check_ranges(const CompactOffsets& compact, const std::vector<std::uint32_t>& offsets) {
  REQUIRE(compact.size() + 1 == offsets.size());
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    INFO("item " << i);
    const auto [first, last] = compact.range(i);
    CHECK(first == offsets[i]);
    CHECK(last == offsets[i + 1]);
  }
  CHECK(compact.expand() == offsets);
}

// From the full offsets, and item by item as the scan builds them (its Builder, counts only); and, for
// offsets from 0, viewing the arrays of either (what an index file keeps).
void check_same(const std::vector<std::uint32_t>& offsets) {
  const CompactOffsets whole(offsets);
  check_ranges(whole, offsets);
  CompactOffsets::Builder builder(offsets.size() - 1, offsets.front());
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) builder.add(offsets[i + 1] - offsets[i]);
  check_ranges(builder.finish(), offsets);
  if (offsets.front() != 0) return;
  const std::optional<CompactOffsets> viewed = CompactOffsets::viewing(whole.arrays(), offsets.back());
  REQUIRE(viewed);
  check_ranges(*viewed, offsets);
  CHECK(viewed->memory_bytes() == 0);
}

// Copies of a CompactOffsets' arrays, to damage one at a time.
struct ArrayCopies {
  explicit ArrayCopies(const CompactOffsets::Arrays& a)
      : items(a.items), first(a.first.begin(), a.first.end()), ends(a.ends.begin(), a.ends.end()),
        wide(a.wide.begin(), a.wide.end()) {}
  CompactOffsets::Arrays arrays() const { return {items, first, ends, wide}; }
  std::size_t items;
  std::vector<std::uint32_t> first;
  std::vector<std::uint8_t> ends;
  std::vector<std::uint32_t> wide;
};

}  // namespace

TEST_CASE("CompactOffsets gives every item the range its full offsets give", "[compact_offsets]") {
  SECTION("no items") { check_same({0}); }
  SECTION("one item of each count at the narrow bound and past it") {
    check_same(offsets_of({0}));
    check_same(offsets_of({255}));
    check_same(offsets_of({256}));
  }
  SECTION("random counts, most small, a few past a byte, over lines and a partial last line") {
    std::mt19937 random(19);
    for (const std::size_t items : {1u, 63u, 64u, 65u, 1000u, 20011u}) {
      INFO(items << " items");
      std::vector<std::uint32_t> counts(items);
      for (std::uint32_t& c : counts) {
        const std::uint32_t draw = random() % 1000;
        c = draw < 600 ? 1 : draw < 900 ? 0 : draw < 995 ? random() % 256 : 256 + random() % 5000;
      }
      check_same(offsets_of(counts));
    }
  }
  SECTION("offsets that start past 0, narrow and wide lines") {
    std::vector<std::uint32_t> offsets = offsets_of({3, 0, 1, 700, 2});
    for (std::uint32_t& o : offsets) o += 1000;
    check_same(offsets);
    std::vector<std::uint32_t> narrow = offsets_of(std::vector<std::uint32_t>(120, 2));
    for (std::uint32_t& o : narrow) o += 77;
    check_same(narrow);
  }
  SECTION("a line whose items hold 255 entries between them is narrow, one of 256 wide") {
    constexpr std::uint32_t n = CompactOffsets::kPerLine;
    std::vector<std::uint32_t> counts(n, 3);
    counts[0] = 255 - (n - 1) * 3;
    check_same(offsets_of(counts));
    ++counts[n - 1];
    check_same(offsets_of(counts));
    std::vector<std::uint32_t> twice = counts;
    twice.insert(twice.end(), counts.begin(), counts.end() - 1);  // a wide line, then a partial wide one
    check_same(offsets_of(twice));
  }
  SECTION("few entries an item take about a byte an item") {
    std::mt19937 random(7);
    std::vector<std::uint32_t> counts(CompactOffsets::kPerLine * 1000);
    for (std::uint32_t& c : counts) c = random() % 4;
    const std::vector<std::uint32_t> offsets = offsets_of(counts);
    check_same(offsets);
    CHECK(CompactOffsets(offsets).memory_bytes() <= counts.size() * 17 / 16);
  }
  SECTION("a line whose counts add up past 16 bits") {
    check_same(offsets_of(std::vector<std::uint32_t>(200, 255)));
  }
}

TEST_CASE("CompactOffsets views only arrays whose every range lies in order inside the entries", "[compact_offsets]") {
  // Two narrow lines, a wide one and a partial narrow one.
  std::vector<std::uint32_t> counts(CompactOffsets::kPerLine * 3 + 5, 1);
  counts[CompactOffsets::kPerLine * 2] = 300;
  std::vector<std::uint32_t> offsets{0};
  for (const std::uint32_t c : counts) offsets.push_back(offsets.back() + c);
  const CompactOffsets whole(offsets);
  const std::uint32_t entries = offsets.back();
  ArrayCopies copy(whole.arrays());
  REQUIRE(CompactOffsets::viewing(copy.arrays(), entries));
  REQUIRE(copy.wide.size() == CompactOffsets::kPerLine + 1);

  SECTION("another entry count") {
    CHECK(!CompactOffsets::viewing(copy.arrays(), entries - 1));
    CHECK(!CompactOffsets::viewing(copy.arrays(), entries + 1));
  }
  SECTION("another item count") {
    copy.items -= CompactOffsets::kPerLine;
    CHECK(!CompactOffsets::viewing(copy.arrays(), entries));
  }
  SECTION("an item ending before the one before it") {
    std::swap(copy.ends[3], copy.ends[4]);
    CHECK(!CompactOffsets::viewing(copy.arrays(), entries));
  }
  SECTION("a line not starting where the one before ended") {
    ++copy.first[1];
    CHECK(!CompactOffsets::viewing(copy.arrays(), entries));
  }
  SECTION("a wide line's run past the wide offsets") {
    copy.ends[CompactOffsets::kPerLine * 2] = 1;
    CHECK(!CompactOffsets::viewing(copy.arrays(), entries));
  }
  SECTION("a wide line's offsets out of order") {
    std::swap(copy.wide[1], copy.wide[2]);
    CHECK(!CompactOffsets::viewing(copy.arrays(), entries));
  }
  SECTION("a line's ends cut short") {
    copy.ends.pop_back();
    CHECK(!CompactOffsets::viewing(copy.arrays(), entries));
    CHECK(!CompactOffsets::viewing(copy.arrays(), entries, ItemChecks::sizes_only));
  }
  SECTION("with the sizes alone checked (a file as heapscope wrote it), the offsets are not looked at") {
    std::swap(copy.ends[3], copy.ends[4]);
    CHECK(CompactOffsets::viewing(copy.arrays(), entries, ItemChecks::sizes_only));
    copy.items -= CompactOffsets::kPerLine;
    CHECK(!CompactOffsets::viewing(copy.arrays(), entries, ItemChecks::sizes_only));
  }
}
