// The leak report tallies the leaked blocks in slices on all cores and sums the slices in block order:
// over a heap of 100,000 leaked blocks (two slices on a machine of two cores or more), its groups and
// examples are what one pass in block order gives — an indirect leak is an example only while no direct
// leak of its group came before it, wherever the slices are cut.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <vector>

#include "fake_image.h"
#include "toy_session.h"

using namespace heapscope;
using heapscope::testing::FakeImage;

namespace {

constexpr Address kObjects = 0x7e0000000000;

}  // namespace

TEST_CASE("leak report: slices on all cores give one pass's groups and examples") {
  constexpr std::size_t kBlocks = 100000;
  std::vector<std::uint64_t> sizes(kBlocks, 16);  // each a direct leak of its own, unless said below
  sizes[10] = 24;                                 // the first 24-byte block: a direct leak
  sizes[60000] = 48;                              // points to blocks 0-4: they are indirect
  sizes[69990] = 32;                              // points to blocks 70000-70002: indirect, 24 bytes
  for (std::size_t b = 70000; b <= 70002; ++b) sizes[b] = 24;
  std::vector<Address> at(kBlocks);
  Address next = kObjects;
  for (std::size_t b = 0; b < kBlocks; ++b) {
    at[b] = next;
    next += sizes[b];
  }
  auto image = std::make_shared<FakeImage>();
  image->add_region(kObjects, next - kObjects);
  for (std::size_t b = 0; b < 5; ++b) image->put(at[60000] + 8 * b, at[b]);
  for (std::size_t b = 0; b < 3; ++b) image->put(at[69990] + 8 * b, at[70000 + b]);

  const nlohmann::json leaks = heapscope::testing::command_json(image, heapscope::testing::PackedToyPlugin(kObjects, sizes), {"leaks"});
  CHECK(leaks["totals"]["blocks"] == kBlocks);
  CHECK(leaks["totals"]["indirect"]["blocks"] == 8);
  std::map<std::uint64_t, nlohmann::json> by_size;
  for (const auto& g : leaks["groups"]) by_size[g["size"].get<std::uint64_t>()] = g;
  REQUIRE(by_size.size() == 4);
  // 16 bytes: the indirect blocks 0-2 come before any direct leak of the group, so they are its examples.
  CHECK(by_size[16]["count"] == kBlocks - 6);
  CHECK(by_size[16]["indirect"] == 5);
  CHECK(by_size[16]["examples"] == nlohmann::json({at[0], at[1], at[2]}));
  // 24 bytes: block 10 is direct; the indirect ones after it (in the other slice) are no examples.
  CHECK(by_size[24]["count"] == 4);
  CHECK(by_size[24]["direct"] == 1);
  CHECK(by_size[24]["indirect"] == 3);
  CHECK(by_size[24]["examples"] == nlohmann::json({at[10]}));
  CHECK(by_size[32]["examples"] == nlohmann::json({at[69990]}));
  CHECK(by_size[48]["examples"] == nlohmann::json({at[60000]}));
  // Largest bytes first.
  CHECK(leaks["groups"][0]["size"] == 16);
}
