#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "base/bounded_scan.h"
#include "base/workers.h"
#include "model/leak_verdicts.h"

using namespace heapscope;

namespace {

template <typename T>
bool plainly_below(const std::vector<T>& items, std::uint64_t bound) {
  return std::all_of(items.begin(), items.end(), [bound](T x) { return x < bound; });
}

// Arrays of every length up to a few vectors and one long one, each with its largest item at every place
// in turn: the vector loop and the tail both see it, and every bound around it is asked.
template <typename T>
void check_all_below(std::mt19937_64& random, std::uint64_t top) {
  for (std::size_t n : {0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 1000}) {
    std::vector<T> items(n);
    for (T& x : items) x = static_cast<T>(random() % (top / 2));
    for (std::size_t at = 0; at < n; at += (n > 40 ? 97 : 1)) {
      std::vector<T> with = items;
      with[at] = static_cast<T>(top - 1 - random() % 3);
      const std::uint64_t largest = *std::max_element(with.begin(), with.end());
      for (std::uint64_t bound : {std::uint64_t{0}, std::uint64_t{1}, largest - 1, largest, largest + 1, top, top + 1}) {
        INFO("n " << n << " at " << at << " bound " << bound);
        CHECK(all_below(std::span<const T>(with), bound) == plainly_below(with, bound));
      }
    }
    CHECK(all_below(std::span<const T>(items), 0) == items.empty());
  }
}

}  // namespace

TEST_CASE("bounded scans agree with plain loops, in the vectors and in the tail", "[base]") {
  std::mt19937_64 random(7);
  check_all_below<std::uint8_t>(random, 0x100);
  check_all_below<std::uint16_t>(random, 0x10000);
  check_all_below<std::uint32_t>(random, 0x100000000ull);
  // Unsigned order, not signed: items with the top bit set are the largest.
  const std::vector<std::uint32_t> high{0x80000000u, 1, 2, 3, 4};
  CHECK_FALSE(all_below(std::span<const std::uint32_t>(high), 0x7fffffffu));
  CHECK(all_below(std::span<const std::uint32_t>(high), 0x80000001u));
  const std::vector<std::uint16_t> high16(9, 0x8000);
  CHECK_FALSE(all_below(std::span<const std::uint16_t>(high16), 0x7fff));
}

TEST_CASE("bounded scans of masked items and ascending bytes agree with plain loops", "[base]") {
  std::mt19937_64 random(3);
  for (std::size_t n : {0, 1, 3, 4, 5, 9, 16, 17, 33, 64}) {
    std::vector<std::uint32_t> edges(n);
    for (std::uint32_t& e : edges) e = static_cast<std::uint32_t>(random() % 100) | (random() % 2 ? 0x80000000u : 0);
    for (std::uint64_t bound : {0, 1, 50, 99, 100, 101}) {
      const bool plain = std::all_of(edges.begin(), edges.end(), [&](std::uint32_t e) { return (e & 0x7fffffffu) < bound; });
      CHECK(all_below(std::span<const std::uint32_t>(edges), bound, 0x7fffffffu) == plain);
    }
    std::vector<std::uint8_t> ends(n);
    for (std::uint8_t& e : ends) e = static_cast<std::uint8_t>(random() % 200);
    std::sort(ends.begin(), ends.end());
    CHECK(ascending(ends));
    for (std::size_t at = 0; at + 1 < n; ++at) {  // one step down anywhere, in the vectors or the tail
      std::vector<std::uint8_t> down = ends;
      if (down[at] == down[at + 1]) continue;
      std::swap(down[at], down[at + 1]);
      INFO("n " << n << " at " << at);
      CHECK_FALSE(ascending(down));
    }
  }
}

TEST_CASE("all_below_or accepts the excepted item wherever it is, and nothing else above the bound", "[base]") {
  std::mt19937_64 random(5);
  const std::uint32_t none = 0xffffffffu;  // a dominator array's "no node"
  for (std::size_t n : {0, 1, 3, 4, 5, 9, 16, 17, 33, 64}) {
    std::vector<std::uint32_t> idom(n);
    for (std::uint32_t& d : idom) d = random() % 3 == 0 ? none : static_cast<std::uint32_t>(random() % 100);
    for (std::uint64_t bound : {0, 1, 50, 99, 100, 101}) {
      const bool plain = std::all_of(idom.begin(), idom.end(), [&](std::uint32_t d) { return d < bound || d == none; });
      INFO("n " << n << " bound " << bound);
      CHECK(all_below_or(std::span<const std::uint32_t>(idom), bound, none) == plain);
    }
    for (std::size_t at = 0; at < n; ++at) {  // one item just past the bound, in the vectors or the tail
      std::vector<std::uint32_t> past = idom;
      past[at] = 100;
      INFO("n " << n << " at " << at);
      CHECK_FALSE(all_below_or(std::span<const std::uint32_t>(past), 100, none));
      CHECK(all_below_or(std::span<const std::uint32_t>(past), 101, none));
    }
  }
}

TEST_CASE("holds_in_all_slices is false when one slice's test fails, wherever that slice is", "[base]") {
  const std::size_t items = 4 * kBlocksPerWorker + 5;
  for (std::size_t bad : {std::size_t{0}, items / 2, items - 1}) {
    INFO("bad item " << bad);
    CHECK_FALSE(holds_in_all_slices(items, kBlocksPerWorker, [&](std::size_t first, std::size_t last) {
      return bad < first || bad >= last;
    }));
  }
  std::vector<char> seen(items);
  CHECK(holds_in_all_slices(items, kBlocksPerWorker, [&](std::size_t first, std::size_t last) {
    std::fill(seen.begin() + first, seen.begin() + last, 1);
    return true;
  }));
  CHECK(std::all_of(seen.begin(), seen.end(), [](char c) { return c == 1; }));
}

TEST_CASE("each_above visits, in order, the items above the floor in a slice", "[base]") {
  std::mt19937_64 random(11);
  std::vector<std::uint8_t> items(1000);
  for (std::uint8_t& x : items) x = static_cast<std::uint8_t>(random() % 5);
  for (auto [first, last] : {std::pair<std::size_t, std::size_t>{0, 1000}, {3, 3}, {5, 18}, {17, 999}, {990, 1000}}) {
    std::vector<std::size_t> seen, expected;
    each_above(std::span<const std::uint8_t>(items), first, last, 1, [&](std::size_t i) { seen.push_back(i); });
    for (std::size_t i = first; i < last; ++i)
      if (items[i] > 1) expected.push_back(i);
    CHECK(seen == expected);
  }
}

TEST_CASE("leaked_blocks lists the blocks with a leaked verdict, in order, across workers' slices", "[verdicts]") {
  std::mt19937_64 random(5);
  std::vector<Verdict> verdicts(3 * kBlocksPerWorker + 5);  // several workers' slices, none a whole vector
  for (Verdict& v : verdicts) v = static_cast<Verdict>(random() % 5);
  std::vector<BlockId> expected;
  for (std::size_t b = 0; b < verdicts.size(); ++b)
    if (is_leaked(verdicts[b])) expected.push_back(static_cast<BlockId>(b));
  CHECK(leaked_blocks(verdicts) == expected);
  CHECK(leaked_blocks({}).empty());
}
