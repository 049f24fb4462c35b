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

void check_same(const std::vector<std::uint32_t>& offsets) {
  const CompactOffsets compact(offsets);
  REQUIRE(compact.size() + 1 == offsets.size());
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    INFO("item " << i);
    const auto [first, last] = compact.range(i);
    CHECK(first == offsets[i]);
    CHECK(last == offsets[i + 1]);
  }
  CHECK(compact.expand() == offsets);
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
    for (const std::size_t items : {1u, 55u, 56u, 57u, 1000u, 20011u}) {
      INFO(items << " items");
      std::vector<std::uint32_t> counts(items);
      for (std::uint32_t& c : counts) {
        const std::uint32_t draw = random() % 1000;
        c = draw < 600 ? 1 : draw < 900 ? 0 : draw < 995 ? random() % 256 : 256 + random() % 5000;
      }
      check_same(offsets_of(counts));
    }
  }
  SECTION("a line whose counts add up past 16 bits") {
    check_same(offsets_of(std::vector<std::uint32_t>(200, 255)));
  }
}
