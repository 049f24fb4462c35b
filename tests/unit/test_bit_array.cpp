// BitArray and RankedBits (base/bit_array.h) against a std::vector<bool> and counts made the plain way, on
// sizes around word boundaries.
#include <catch2/catch.hpp>

#include <bit>
#include <random>
#include <vector>

#include "base/bit_array.h"

using namespace heapscope;

TEST_CASE("ones_in counts a word's bits as std::popcount does", "[bits]") {
  std::mt19937_64 random(7);
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t w = random() & random();
    CHECK(ones_in(w) == static_cast<std::size_t>(std::popcount(w)));
  }
  CHECK(ones_in(0) == 0);
  CHECK(ones_in(~std::uint64_t{0}) == 64);
}

TEST_CASE("a BitArray and a RankedBits hold what was set, in order, with each member's rank", "[bits]") {
  std::mt19937 random(11);
  for (const std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{65},
                                 std::size_t{1000}}) {
    INFO("size " << size);
    BitArray bits(size);
    std::vector<bool> plain(size, false);
    for (std::size_t i = 0; i < size; ++i)
      if (random() % 3 == 0) {
        bits.set(i);
        plain[i] = true;
      }
    if (size > 10) {
      bits.clear(10);
      plain[10] = false;
    }
    std::vector<std::size_t> listed;
    bits.for_each_set([&](std::size_t i) { listed.push_back(i); });
    std::vector<std::size_t> expected;
    for (std::size_t i = 0; i < size; ++i)
      if (plain[i]) expected.push_back(i);
    CHECK(listed == expected);
    CHECK(bits.count() == expected.size());
    for (std::size_t i = 0; i < size; ++i) CHECK(bits.test(i) == plain[i]);

    const RankedBits ranked(std::move(bits));
    CHECK(ranked.members() == expected.size());
    for (std::size_t slot = 0; slot < expected.size(); ++slot) CHECK(ranked.slot_of(expected[slot]) == slot);
    for (std::size_t i = 0; i < size; ++i)
      if (!plain[i]) CHECK(ranked.slot_of(i) == RankedBits::kNotMember);
    CHECK(ranked.slot_of(size) == RankedBits::kNotMember);
  }
}
