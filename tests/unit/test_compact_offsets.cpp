#include <catch2/catch.hpp>

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

// From the full offsets, and item by item as the scan builds them (its Builder, counts only).
void check_same(const std::vector<std::uint32_t>& offsets) {
  check_ranges(CompactOffsets(offsets), offsets);
  CompactOffsets::Builder builder(offsets.size() - 1, offsets.front());
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) builder.add(offsets[i + 1] - offsets[i]);
  check_ranges(builder.finish(), offsets);
}

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
